/* The series' website: search snippets from a page's article alone, a language switch that keeps the section, and
   code blocks that say when they scroll sideways. */

/* Sphinx's search shows a snippet of each page found, taken from the page's main element, which in this theme also
   holds the header's buttons and the theme switch ("System Settings Light Dark", "Open in Colab"). The snippet
   comes from the article's text instead: not the settings and set-up cells (a Colab form's code, the machine's
   line), nor what a fold hides (folded code, a solution), which a reader of the page does not see either. */
const SITE_NOT_TEXT = [
  ".headerlink", "script", "style", ".site-header", ".bd-header-article",
  ".cell.tag_parameters", ".cell.tag_setup", "details",
].join(", ");
function siteArticleText(htmlString, anchor) {
  const page = new DOMParser().parseFromString(htmlString, "text/html");
  for (const furniture of page.querySelectorAll(SITE_NOT_TEXT)) {
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

/* A code block wider than its box (on a phone) gets the class site-scrolls, which site.css draws as a shadow on the
   edge with more code; measured again whenever its size changes (a fold opened, the fonts loaded, the screen
   turned). */
function siteMarkScrolling() {
  const mark = (pre) => pre.classList.toggle("site-scrolls", pre.scrollWidth > pre.clientWidth + 1);
  const blocks = document.querySelectorAll(".bd-article div.highlight pre");
  if (typeof ResizeObserver === "undefined") {
    blocks.forEach(mark);
    return;
  }
  const observer = new ResizeObserver((entries) => entries.forEach((entry) => mark(entry.target)));
  blocks.forEach((pre) => observer.observe(pre));
  document.fonts?.ready.then(() => blocks.forEach(mark));  // a webfont widens the code, not its box
}
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", siteMarkScrolling);
} else {
  siteMarkScrolling();
}
