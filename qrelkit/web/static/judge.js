// qrelkit's judging page: keyboard keys (0-9 a grade, s skip, u undo) and, while the next batch
// is computed or other assessors finish, a poll of /api/topics/<qid>/state that reloads the page
// when its state changes. Every control is a plain form: without this script the pages still work.
(function () {
  "use strict";
  var topic = document.getElementById("topic");
  if (!topic) { return; }
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) { return; }
    var t = ev.target && ev.target.tagName;
    if (t === "INPUT" || t === "TEXTAREA" || t === "SELECT") { return; }
    var button = document.querySelector('button[data-key="' + ev.key + '"]');
    if (button && !button.disabled) {
      ev.preventDefault();
      document.querySelectorAll("button[data-key]").forEach(function (b) { b.disabled = true; });
      button.disabled = false;
      button.click();
    }
  });
  var state = topic.getAttribute("data-state");
  if (state === "computing" || state === "waiting") {
    var url = "/api/topics/" + encodeURIComponent(topic.getAttribute("data-qid")) + "/state";
    var poll = function () {
      fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (s) { if (s.state !== state) { window.location.reload(); } else { setTimeout(poll, 1500); } })
        .catch(function () { setTimeout(poll, 5000); });
    };
    setTimeout(poll, 1000);
  }
})();
