// Material's search overlay is a role="dialog" without a name (axe: aria-dialog-name).
(function () {
  var dialog = document.querySelector('.md-search[role="dialog"]');
  if (dialog && !dialog.hasAttribute("aria-label")) {
    var label = document.querySelector('.md-search__input');
    dialog.setAttribute("aria-label", (label && label.getAttribute("aria-label")) ||
      (document.documentElement.lang === "es" ? "Buscar" : "Search"));
  }
})();
