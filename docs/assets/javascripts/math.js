// Renders the math pymdownx.arithmatex leaves in the page (\( ... \) inline, \[ ... \] displayed) with the
// KaTeX copy served by this site (docs/assets/katex). Dollar signs are left alone: the pages hold shell
// variables. Material's document$ fires on every page load.
document$.subscribe(({ body }) => {
  renderMathInElement(body, {
    delimiters: [
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true },
    ],
    throwOnError: false,
  });
});
