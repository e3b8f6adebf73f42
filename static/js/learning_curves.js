// Learning curves of a trial or a trained model, drawn with Plotly from the page's
// json_script "learning-curves": loss on the left, the task's metric on the right; solid
// validation, dotted train; one colour per series (a retrain's phases, a trial's executions);
// dashed vertical lines at the marked epochs (best epoch, cap, the study's last epoch). Redrawn
// when htmx swaps in a fresher fragment while the model trains.
(function () {
  const palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
  const config = { displaylogo: false, responsive: true };

  function draw() {
    const source = document.getElementById("learning-curves");
    const target = document.getElementById("learning-curves-chart");
    if (!source || !target || typeof Plotly === "undefined") return;
    const data = JSON.parse(source.textContent);
    const traces = [];
    data.series.forEach((s, i) => {
      const color = palette[i % palette.length];
      const line = (y, axis, name, dash, legend) => {
        if (y) traces.push({ x: s.epoch, y, mode: "lines", name: `${s.name}: ${name}`, legendgroup: s.name,
          showlegend: legend, xaxis: axis === 1 ? "x" : "x2", yaxis: axis === 1 ? "y" : "y2",
          line: { color, dash } });
      };
      line(s.val_loss, 1, "validation", "solid", true);
      line(s.loss, 1, "train", "dot", true);
      line(s.val_metric, 2, `validation ${data.metric}`, "solid", false);
      line(s.metric, 2, `train ${data.metric}`, "dot", false);
    });
    const shapes = [], annotations = [];
    // Marks on the same epoch (the best epoch was the cap) share one line and one label.
    const byEpoch = new Map();
    data.marks.forEach((m) => byEpoch.set(m.epoch, [...(byEpoch.get(m.epoch) || []), m.label]));
    [...byEpoch].map(([epoch, labels]) => ({ epoch, label: labels.join(" = ") })).forEach((m) => {
      ["x", "x2"].forEach((axis) => {
        shapes.push({ type: "line", xref: axis, yref: axis === "x" ? "y domain" : "y2 domain", x0: m.epoch, x1: m.epoch,
          y0: 0, y1: 1, line: { color: "#888", width: 1, dash: "dash" } });
      });
      annotations.push({ x: m.epoch, xref: "x", y: 1, yref: "y domain", text: m.label, showarrow: false,
        yanchor: "bottom", font: { size: 10, color: "#555" } });
    });
    Plotly.react(target, traces, {
      grid: { rows: 1, columns: 2, pattern: "independent" }, height: 380,
      margin: { l: 50, r: 20, t: 30, b: 40 }, legend: { orientation: "h", y: -0.3, yanchor: "top" },
      xaxis: { title: { text: "epoch" } }, xaxis2: { title: { text: "epoch" } },
      yaxis: { title: { text: "loss" } }, yaxis2: { title: { text: data.metric } },
      shapes, annotations,
    }, config);
  }
  draw();
  document.body.addEventListener("htmx:afterSettle", draw);
})();
