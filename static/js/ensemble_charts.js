// The ensemble report's charts: member weights (bars) and the members' prediction
// correlation on the validation split (heatmap). Data comes from the page's json_script;
// drawn on load and again when htmx swaps in the finished report.
(function () {
  function draw() {
    const source = document.getElementById("ensemble-report");
    if (!source || typeof Plotly === "undefined") return;
    const report = JSON.parse(source.textContent);
    // The page's member names (trials by their 1-based number), where the report has the worker's.
    const labels = document.getElementById("ensemble-member-labels");
    const named = labels ? JSON.parse(labels.textContent) : [];
    if (report.members && named.length === report.members.length) report.members = named;
    const config = { displaylogo: false, responsive: true };
    const layout = (title) => ({ title: { text: title }, margin: { l: 180, r: 20, t: 40, b: 40 }, height: 300 });
    if (report.weights && document.getElementById("weights-chart")) {
      Plotly.react("weights-chart", [{ type: "bar", orientation: "h", x: report.weights, y: report.members }],
        { ...layout("Weights"), xaxis: { range: [0, 1] }, yaxis: { automargin: true } }, config);
    }
    if (report.correlation && document.getElementById("correlation-chart")) {
      // Scale to the off-diagonal range (members are often 0.9+ alike) and print each value.
      const off = report.correlation.flatMap((row, i) => row.filter((_, j) => j !== i));
      const low = Math.min(...off, 0.99);
      Plotly.react("correlation-chart", [{
        type: "heatmap", z: report.correlation, x: report.members, y: report.members,
        zmin: low, zmax: 1, colorscale: "Blues", texttemplate: "%{z:.3f}", hovertemplate: "%{x} / %{y}: %{z:.4f}<extra></extra>",
      }], { ...layout("Correlation"), height: 360, xaxis: { automargin: true }, yaxis: { automargin: true } }, config);
    }
  }
  draw();
  document.body.addEventListener("htmx:afterSettle", draw);
})();
