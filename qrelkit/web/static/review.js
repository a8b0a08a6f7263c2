// The review of one's judgments on a topic (/topics/<qid>/review): keys to move among the
// judgments (ArrowDown or j, ArrowUp or k; Home, End) and to give the chosen one a grade (the
// grade's digit submits that row's form). The rows are focusable (Tab) and their buttons plain
// form buttons: without this script the page still works. After a change the changed row has
// the focus again.
(function () {
  "use strict";
  var rows = Array.prototype.slice.call(document.querySelectorAll("#review-table tbody tr[data-docid]"));
  if (!rows.length) { return; }
  function current() {
    var el = document.activeElement;
    var row = el && el.closest ? el.closest("#review-table tbody tr[data-docid]") : null;
    return row ? rows.indexOf(row) : -1;
  }
  function focusRow(i) {
    var row = rows[Math.max(0, Math.min(rows.length - 1, i))];
    row.focus();
    row.scrollIntoView({ block: "nearest" });
  }
  var saved = document.querySelector("#review-table tr[data-saved]");
  focusRow(saved ? rows.indexOf(saved) : 0);
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) { return; }
    var t = ev.target && ev.target.tagName;
    if (t === "INPUT" || t === "TEXTAREA" || t === "SELECT") { return; }
    var i = current();
    var moves = { ArrowDown: i + 1, j: i + 1, ArrowUp: i - 1, k: i - 1, Home: 0, End: rows.length - 1 };
    if (Object.prototype.hasOwnProperty.call(moves, ev.key)) {
      ev.preventDefault();
      focusRow(i < 0 ? 0 : moves[ev.key]);
      return;
    }
    if (i < 0) { return; }
    var button = rows[i].querySelector('button.change[data-grade="' + ev.key + '"]');
    if (button && !button.disabled) {
      ev.preventDefault();
      rows[i].querySelectorAll("button.change").forEach(function (b) { b.disabled = b !== button; });
      button.click();
    }
  });
})();
