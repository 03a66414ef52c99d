/* The series' website: search snippets from a page's article alone, a language switch that keeps the section, and
   code blocks that say when they scroll sideways. */

/* Sphinx's search shows a snippet of each page found, taken from the page's main element, which in this theme also
   holds the header's buttons and the theme switch ("System Settings Light Dark", "Open in Colab"). The snippet
   comes from the article's text instead: not the settings and set-up cells (the settings, the machine's line),
   nor a solution (its code, its answer). A recap's folded code is the lesson's, which a learner opens to read. */
const SITE_NOT_TEXT = [
  ".headerlink", "script", "style", ".site-header", ".bd-header-article",
  ".cell.tag_parameters", ".cell.tag_setup", ".cell.tag_solution", "details.solution", "summary .expanded",
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
/* A snippet centred on the word as the reader typed it ("pin_memory", not Sphinx's stem "pin_memori"), at its first
   place outside an import line (every page imports DataLoader before it teaches it); else where Sphinx would. */
function siteImportLine(text, at) {
  return /^\s*(import|from)\s/.test(text.slice(text.lastIndexOf("\n", at) + 1, at));
}
function siteSearchSummary(htmlText, keywords, anchor) {
  const text = Search.htmlToText(htmlText, anchor);
  if (text === "") return null;
  const lower = text.toLowerCase();
  const typed = (new URLSearchParams(window.location.search).get("q") || "").split(/\s+/).filter(Boolean);
  let at = -1;
  for (const word of [...typed, ...keywords].map((w) => w.toLowerCase())) {
    let i = lower.indexOf(word);
    while (i > -1 && siteImportLine(text, i)) i = lower.indexOf(word, i + 1);
    if (i > -1) { at = i; break; }
  }
  if (at === -1) at = Math.max(0, ...[...keywords].map((k) => lower.indexOf(k.toLowerCase())));
  const start = Math.max(at - 120, 0);
  const summary = document.createElement("p");
  summary.classList.add("context");
  summary.textContent = (start ? "..." : "") + text.substr(start, 240).trim() + (start + 240 < text.length ? "..." : "");
  return summary;
}
function sitePatchSearch() {
  if (typeof Search === "undefined") return;  // searchtools.js, on the search page
  Search.htmlToText = siteArticleText;
  Search.makeSearchSummary = siteSearchSummary;
}
sitePatchSearch();
document.addEventListener("DOMContentLoaded", sitePatchSearch);  // searchtools.js loads after this file

/* The language switch opens the same section of the page in the other language: both editions give a section the
   same anchor (make_site.py's Anchors). The section is the one in view: that of the last heading above the top of
   the screen (below the sticky header), whether the reader scrolled there or followed a link. */
function siteSectionInView() {
  const header = document.querySelector(".bd-header-article");
  const top = Math.max(header ? header.getBoundingClientRect().bottom : 0, 0) + 40;  // a heading just scrolled to
  let found = null;
  for (const heading of document.querySelectorAll("article section[id] > :is(h1, h2, h3, h4, h5, h6)")) {
    if (heading.getBoundingClientRect().top > top) break;
    found = heading.parentElement.id;
  }
  return found;
}
function siteCarrySection(event) {
  const link = event.target.closest && event.target.closest("a.site-lang-switch");
  if (!link) return;
  const section = window.scrollY > 0 ? siteSectionInView() : null;
  link.href = link.href.split("#")[0] + (section ? "#" + section : "");
}
for (const kind of ["click", "auxclick", "contextmenu"]) document.addEventListener(kind, siteCarrySection);

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
