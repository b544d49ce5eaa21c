// Reloads the page every data-refresh seconds, unless the operator is
// filling in a form (a field focused or typed in, an action opened).
(function () {
  var s = Number(document.body.dataset.refresh) || 5;
  setInterval(function () {
    if (document.querySelector("details[open]")) return;
    var a = document.activeElement;
    if (a && (a.tagName === "INPUT" || a.tagName === "BUTTON")) return;
    location.reload();
  }, s * 1000);
})();
