// Renders the formulas that pymdownx.arithmatex (generic mode) leaves in the page,
// \( ... \) inline and \[ ... \] display, with the KaTeX copy bundled under
// docs/assets/katex: no network needed, so the site reads the same offline.
function renderMaths(root) {
  for (const element of root.querySelectorAll(".arithmatex")) {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true }
      ],
      throwOnError: false
    });
  }
}

// Material's instant navigation swaps pages without a reload; document$ emits for each page.
if (typeof document$ !== "undefined") {
  document$.subscribe(({ body }) => renderMaths(body));
} else {
  document.addEventListener("DOMContentLoaded", () => renderMaths(document.body));
}
