// The study comparison's history chart, drawn with Plotly (served from the installed package)
// from the page's json_script: per study, a best-so-far line and its trials' scores as faint
// dots, in one colour. Studies with the same objective share a y axis; each other objective
// gets its own axis below, over the same trial numbers.
(function () {
  const source = document.getElementById("compare-data");
  if (!source || typeof Plotly === "undefined") return;
  const data = JSON.parse(source.textContent);
  const palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
  const groups = data.objectives;
  const axisOf = {};
  groups.forEach((g, i) => g.studies.forEach((id) => { axisOf[id] = i; }));
  const axisName = (i) => (i === 0 ? "y" : "y" + (i + 1));

  const traces = [];
  data.studies.forEach((s, i) => {
    const color = palette[i % palette.length];
    const yaxis = axisName(axisOf[s.id]);
    const h = s.history;
    const labels = h.number.map((n) => s.name + ", trial " + n);
    traces.push({ x: h.number, y: h.score, mode: "markers", name: s.name + " trials", legendgroup: String(s.id),
                  showlegend: false, marker: { color, size: 6, opacity: 0.3 }, text: labels, hoverinfo: "text+y", yaxis });
    traces.push({ x: h.number, y: h.best, mode: "lines", name: s.name, legendgroup: String(s.id),
                  line: { color, width: 2, shape: "hv" }, yaxis, meta: { study: s.id } });
  });

  const layout = { height: 260 + 160 * groups.length, margin: { l: 70, r: 20, t: 30, b: 50 },
                   xaxis: { title: { text: "trial (start order)" }, anchor: axisName(groups.length - 1) },
                   legend: { orientation: "h", y: 1.08 } };
  const gap = groups.length > 1 ? 0.06 : 0;
  groups.forEach((g, i) => {
    // The first objective on top, the others below it.
    const top = 1 - i / groups.length;
    const bottom = 1 - (i + 1) / groups.length;
    const verb = g.direction === "max" ? "max" : "min";
    layout[i === 0 ? "yaxis" : "yaxis" + (i + 1)] = {
      title: { text: g.metric + " (" + verb + ")" }, domain: [bottom + (i < groups.length - 1 ? gap / 2 : 0), top - (i ? gap / 2 : 0)],
      anchor: "x",
    };
  });
  Plotly.newPlot("compare-history", traces, layout, { displaylogo: false, responsive: true });
})();
