(function () {
  "use strict";
  function key(td, num) {
    var v = td.getAttribute("data-v");
    if (num) { return v === null || v === "" ? NaN : parseFloat(v); }
    return td.textContent.toLowerCase();
  }
  document.querySelectorAll("table.tp-sortable").forEach(function (table) {
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    heads.forEach(function (th, col) {
      var btn = th.querySelector("button");
      if (!btn) { return; }
      btn.addEventListener("click", function () {
        var num = th.getAttribute("data-type") === "num";
        var cur = th.getAttribute("aria-sort");
        var dir = cur === "descending" ? "ascending" : cur === "ascending" ? "descending"
          : (num ? "descending" : "ascending");
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir);
        var sign = dir === "ascending" ? 1 : -1;
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows).map(function (r, i) {
          return [key(r.cells[col], num), i, r];
        });
        rows.sort(function (a, b) {
          var x = a[0], y = b[0];
          if (num) {
            var xn = isNaN(x), yn = isNaN(y);
            if (xn || yn) { return xn === yn ? a[1] - b[1] : (xn ? 1 : -1); }
            if (x !== y) { return x < y ? -sign : sign; }
          } else {
            var c = x.localeCompare(y);
            if (c) { return sign * c; }
          }
          return a[1] - b[1];
        });
        var frag = document.createDocumentFragment();
        rows.forEach(function (r) { frag.appendChild(r[2]); });
        body.appendChild(frag);
      });
    });
  });
})();
