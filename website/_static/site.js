/* The series' website: search snippets from a page's article alone, and a language switch that keeps the section. */

/* Sphinx's search shows a snippet of each page found, taken from the page's main element, which in this theme also
   holds the header's buttons and the theme switch ("System Settings Light Dark", "Open in Colab"). The snippet
   comes from the article instead. */
function siteArticleText(htmlString, anchor) {
  const page = new DOMParser().parseFromString(htmlString, "text/html");
  for (const furniture of page.querySelectorAll(".headerlink, script, style, .site-header, .bd-header-article")) {
    furniture.remove();
  }
  const article = page.querySelector("article.bd-article") || page.querySelector('[role="main"]');
  const part = anchor && article && article.querySelector(anchor);
  return (part || article || page.body).textContent;
}
function sitePatchSearch() {
  if (typeof Search !== "undefined") Search.htmlToText = siteArticleText;  // searchtools.js, on the search page
}
sitePatchSearch();
document.addEventListener("DOMContentLoaded", sitePatchSearch);  // searchtools.js loads after this file

/* The language switch opens the same section of the page in the other language: both editions give a section the
   same anchor (make_site.py's Anchors). */
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("a.site-lang-switch");
  if (link && window.location.hash) {
    link.href = link.href.split("#")[0] + window.location.hash;
  }
});
