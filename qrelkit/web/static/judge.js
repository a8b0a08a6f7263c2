// qrelkit's pages: keyboard keys (live.js refreshes the pages that wait). A button with
// data-key="K" (or data-keys="K1 K2 ...") is pressed by those keys: 0-9 a grade, s skip, r the
// review of one's judgments on a topic (review.js has the review's own keys), b back from it;
// ArrowLeft, f, 1 (left), ArrowRight, j, 2 (right) and u undo on a preference task. Every
// control is a plain form: without this script the pages still work.
(function () {
  "use strict";
  function buttonFor(key) {
    var all = document.querySelectorAll("button[data-key], button[data-keys]");
    for (var i = 0; i < all.length; i++) {
      var keys = (all[i].getAttribute("data-keys") || all[i].getAttribute("data-key")).split(" ");
      if (keys.indexOf(key) >= 0) { return all[i]; }
    }
    return null;
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) { return; }
    var t = ev.target && ev.target.tagName;
    if (t === "INPUT" || t === "TEXTAREA" || t === "SELECT") { return; }
    var button = buttonFor(ev.key);
    if (button && !button.disabled) {
      ev.preventDefault();
      document.querySelectorAll("button[data-key], button[data-keys]").forEach(function (b) { b.disabled = true; });
      button.disabled = false;
      button.click();
    }
  });
})();
