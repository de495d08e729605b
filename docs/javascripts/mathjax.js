// MathJax 3 configuration for pymdownx.arithmatex (generic mode wraps math in \( \) and \[ \]
// inside elements of class "arithmatex"); MathJax itself is loaded after this file.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};
