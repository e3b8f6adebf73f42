// The study page's charts, drawn with Plotly (served from the installed package) from
// /studies/<id>/chart-data/. While the study runs they are redrawn in place (Plotly.react)
// with each live update of the page, without reloading it.
(function () {
  const section = document.getElementById("study-charts");
  if (!section || typeof Plotly === "undefined") return;
  const config = { displaylogo: false, responsive: true };
  const base = (title) => ({ title: { text: title, font: { size: 14 } }, margin: { l: 50, r: 20, t: 40, b: 40 }, height: 320 });

  // A chart with nothing to show yet gives way to a sentence saying when it will appear.
  function show(name, drawable) {
    document.getElementById(name + "-chart").hidden = !drawable;
    document.getElementById(name + "-empty").hidden = drawable;
  }

  function draw(data) {
    const h = data.history;
    show("history", h.total > 0);
    show("curves", data.curves.length > 0);
    if (h.total > 0) Plotly.react("history-chart", [
      { x: h.number, y: h.score, mode: "markers", name: data.objective, text: h.number.map((n) => "trial " + n) },
      { x: h.number, y: h.best, mode: "lines", name: "best so far", line: { shape: "hv" } },
    ], { ...base("Optimisation history"), xaxis: { title: { text: "trial" } }, yaxis: { title: { text: data.objective } } }, config);

    // One colour per trial for both of its lines: solid validation, dotted train.
    const palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
    const curves = [];
    data.curves.forEach((c, i) => {
      const color = palette[i % palette.length];
      curves.push({ x: c.epoch, y: c.val_loss, mode: "lines", name: c.trial, legendgroup: c.trial, line: { color } });
      curves.push({ x: c.epoch, y: c.loss, mode: "lines", name: c.trial + " train", legendgroup: c.trial, line: { color, dash: "dot" }, showlegend: false });
    });
    if (curves.length) Plotly.react("curves-chart", curves, { ...base("Learning curves (loss; dotted: train)"), xaxis: { title: { text: "epoch" } } }, config);

    drawParallel(data);
    drawPareto(data.pareto);

    show("importance", data.importance.length > 0);
    if (data.importance.length) {
      const rows = data.importance.slice().reverse();
      Plotly.react("importance-chart", [{ type: "bar", orientation: "h", x: rows.map((r) => r.importance), y: rows.map((r) => r.name) }],
        { ...base("Hyperparameter importance (share of explained variance)"), margin: { l: 140, r: 20, t: 40, b: 40 },
          yaxis: { automargin: true } }, config);
    }
    const note = document.getElementById("charts-note");
    note.textContent = h.shown < h.total ? `History shows ${h.shown} of ${h.total} trials (every improvement kept).` : "";
  }

  // Several objectives: every trial on the first two (a third as colour), the Pareto front
  // joined by a line, infeasible trials as grey crosses.
  function drawPareto(p) {
    if (!p || !document.getElementById("pareto-chart")) return;
    show("pareto", p.points.length > 0);
    if (!p.points.length) return;
    const pick = (rows, i) => rows.map((r) => r.values[i]);
    const label = (rows) => rows.map((r) => "trial " + r.number);
    const front = p.points.filter((r) => r.front).sort((a, b) => a.values[0] - b.values[0]);
    const rest = p.points.filter((r) => !r.front && r.feasible);
    const infeasible = p.points.filter((r) => !r.feasible);
    const colour = p.objectives.length > 2 ? { color: pick(rest, 2), colorscale: "Viridis", showscale: true,
      colorbar: { title: { text: p.objectives[2] } } } : { color: "#9aa9bb" };
    Plotly.react("pareto-chart", [
      { x: pick(rest, 0), y: pick(rest, 1), text: label(rest), mode: "markers", name: "dominated", marker: colour },
      { x: pick(infeasible, 0), y: pick(infeasible, 1), text: label(infeasible), mode: "markers", name: "infeasible",
        marker: { color: "#bbbbbb", symbol: "x" } },
      { x: pick(front, 0), y: pick(front, 1), text: label(front), mode: "lines+markers", name: "Pareto front",
        line: { shape: "hv", color: "#d62728" }, marker: { size: 9, color: "#d62728" } },
    ], { ...base("Pareto front"), xaxis: { title: { text: p.objectives[0] } }, yaxis: { title: { text: p.objectives[1] } } },
    config);
  }

  // Parallel coordinates: the most important hyperparameters by default (the server picks
  // them anew with every update: none before two finished trials differ, and the ranking moves
  // as trials finish), the user adds or removes others with the checkboxes below the chart.
  // Once the user has ticked or unticked one, that choice survives the live redraws, and a
  // hyperparameter that starts to vary later joins unticked.
  let userChoice = null;
  let lastData = null;
  const picker = document.getElementById("parallel-axes");

  function axisPicker(p, chosen) {
    const importance = Object.fromEntries(lastData.importance.map((r) => [r.name, r.importance]));
    const boxes = p.order.map((name) => {
      const label = document.createElement("label");
      label.title = name;
      const box = document.createElement("input");
      box.type = "checkbox";
      box.value = name;
      box.checked = chosen.has(name);
      box.addEventListener("change", () => {
        if (userChoice === null) userChoice = new Set(chosen);
        if (box.checked) userChoice.add(name); else userChoice.delete(name);
        drawParallel(lastData);
      });
      const share = name in importance ? ` (${Math.round(100 * importance[name])}%)` : "";
      label.append(box, ` ${name}${share}`);
      return label;
    });
    picker.querySelector(".axis-boxes").replaceChildren(...boxes);
    picker.querySelector("summary").textContent =
      `Axes: ${chosen.size} of ${p.order.length} hyperparameters` +
      (p.order.length > p.default.length ? ` (the ${p.default.length} most important by default): add or remove` : "");
  }

  function drawParallel(data) {
    lastData = data;
    const p = data.parallel;
    const chosen = userChoice || new Set(p.default);
    const axes = p.order.filter((name) => chosen.has(name))
      .map((name) => p.dimensions.find((d) => d.name === name));
    picker.hidden = p.dimensions.length < 2;
    if (!picker.hidden) axisPicker(p, chosen);
    show("parallel", p.dimensions.length > 0 && axes.length > 0);
    if (!axes.length) return;
    Plotly.react("parallel-chart", [{ type: "parcoords", dimensions: [...axes, p.score], labelangle: 0,
      line: { color: p.score.values, colorscale: "Viridis", reversescale: data.direction === "min", showscale: true } }],
      { height: 340, margin: { l: 60, r: 80, t: 60, b: 30 }, font: { size: 11 } }, config);
    // Titles are cut short so they do not overlap; the full name shows on hover.
    // Plotly keeps axis elements across redraws in its own order: match each by its label.
    const fullNames = new Map([...axes, p.score].map((a) => [a.label, a.name]));
    document.querySelectorAll("#parallel-chart .axis-title").forEach((title) => {
      let tip = title.querySelector("title");
      if (!tip) { tip = document.createElementNS("http://www.w3.org/2000/svg", "title"); title.appendChild(tip); }
      const label = [...title.childNodes].filter((n) => n !== tip).map((n) => n.textContent).join("");
      tip.textContent = fullNames.get(label) || label;
    });
  }

  // Redrawn whenever the live part of the page (htmx, every 2 s while the study runs) has
  // been swapped in, so the charts move with the trial table, and once more when it ends.
  let pending = false;
  function refresh() {
    if (pending) return;
    pending = true;
    fetch(section.dataset.url, { headers: { Accept: "application/json" } })
      .then((r) => r.json())
      .then(draw)
      .finally(() => { pending = false; });
  }
  document.body.addEventListener("htmx:afterSettle", refresh);
  refresh();
})();
