// Applies the remembered theme before the first paint (a classic script, so it runs while the page parses).
(function () {
  var stored = null;
  try { stored = localStorage.getItem("stash-theme"); } catch (e) { stored = null; }
  var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  document.documentElement.dataset.theme = stored === "dark" || stored === "light" ? stored : dark ? "dark" : "light";
})();
