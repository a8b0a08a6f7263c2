// qrelkit's pages: keyboard keys and, while the next batch is computed or other assessors finish,
// a poll of /api/topics/<qid>/state that reloads the page when its state changes. A button with
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
  var topic = document.getElementById("topic");
  var state = topic && topic.getAttribute("data-state");
  if (state === "computing" || state === "waiting") {
    var url = "/api/topics/" + encodeURIComponent(topic.getAttribute("data-qid")) + "/state";
    // the next batch is usually there within a second: look often while it is computed (the
    // poll is one cheap read), seldom while other assessors finish theirs
    var every = state === "computing" ? 200 : 1500;
    var poll = function () {
      fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (s) { if (s.state !== state) { window.location.reload(); } else { setTimeout(poll, every); } })
        .catch(function () { setTimeout(poll, 5000); });
    };
    setTimeout(poll, every);
  }
})();
