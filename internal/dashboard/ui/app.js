// Trainyard dashboard: every page is this script reading the /v1 API with
// the token the user signed in with. No framework; uPlot draws the charts.
// When a page has rendered, <body data-state="ready"> (or "error"); each
// chart's <figure> carries data-points="label:N,..." once uPlot drew it.
'use strict';

(() => {
  const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content || '';
  const temporalUI = meta('trainyard-temporal-ui').replace(/\/+$/, '');
  const namespace = meta('trainyard-namespace') || 'default';
  const TOKEN_KEY = 'trainyard.token';
  const content = document.getElementById('content');

  // ---- token ---------------------------------------------------------

  // A link may carry the token in its fragment (#token=ty_...): keep it
  // for this tab and strip it from the address bar and history.
  function takeFragmentToken() {
    const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
    if (!m) return;
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
  const token = () => sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY) || '';
  function signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
    localStorage.removeItem(TOKEN_KEY);
  }

  class APIError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // api GETs a /v1 path with the token; an error carries the problem's detail.
  async function api(path, tok = token()) {
    const resp = await fetch(path, { headers: { Authorization: 'Bearer ' + tok, Accept: 'application/json' } });
    if (!resp.ok) {
      let detail = resp.statusText;
      try {
        detail = (await resp.json()).detail || detail;
      } catch (_) { /* not a problem document */ }
      throw new APIError(resp.status, `GET ${path}: ${resp.status} ${detail}`);
    }
    return resp.json();
  }
  // apiOr is api, with fallback for a 404 (a route or resource not there).
  async function apiOr(path, fallback) {
    try {
      return await api(path);
    } catch (e) {
      if (e.status === 404) return fallback;
      throw e;
    }
  }

  // ---- DOM helpers -----------------------------------------------------

  // h builds an element; strings and numbers become text (never HTML).
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const enc = encodeURIComponent;
  const link = (href, text) => h('a', { href }, text);
  const runLink = (id) => link('/ui/runs/' + enc(id), id);

  // temporalLink points at a workflow in the Temporal UI (its latest run).
  function temporalLink(workflowID) {
    if (!temporalUI || !workflowID) return null;
    return h('a', { class: 'temporal', href: `${temporalUI}/namespaces/${enc(namespace)}/workflows/${enc(workflowID)}`,
      target: '_blank', rel: 'noopener', title: 'this workflow in the Temporal UI' }, 'Temporal ↗');
  }

  function num(v, digits = 2) {
    if (v === undefined || v === null || v === '') return '';
    if (typeof v !== 'number') return String(v);
    if (Number.isInteger(v)) return v.toLocaleString('en-US');
    return v.toFixed(digits);
  }
  const pct = (v) => (v === undefined || v === null ? '' : (100 * v).toFixed(1) + '%');
  function when(t) {
    if (!t || t.startsWith('0001-')) return '';
    const d = new Date(t);
    return isNaN(d) ? t : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  }
  function ago(t) {
    if (!t || t.startsWith('0001-')) return '';
    const s = Math.max(0, Math.round((Date.now() - new Date(t)) / 1000));
    if (s < 120) return s + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  }
  const mb = (v) => (v ? (v >= 1024 ? (v / 1024).toFixed(1) + ' GiB' : v + ' MiB') : '');
  const badge = (s) => h('span', { class: 'badge ' + String(s || '').toLowerCase() }, s || '');

  // table: columns are [header, row → cell] pairs; rowAttrs(row) adds
  // attributes (data-id, ...) to a row.
  function table(columns, rows, rowAttrs = () => ({}), empty = 'none') {
    if (!rows || rows.length === 0) return h('p', { class: 'empty' }, empty);
    return h('table', {},
      h('thead', {}, h('tr', {}, columns.map(([name]) => h('th', {}, name)))),
      h('tbody', {}, rows.map((r) => h('tr', rowAttrs(r), columns.map(([, get]) => h('td', {}, get(r)))))));
  }

  // facts is a definition list of the non-empty [name, value] pairs.
  const facts = (pairs) => h('dl', { class: 'facts' },
    pairs.filter(([, v]) => v !== undefined && v !== null && v !== '').map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));

  const section = (title, ...body) => h('section', {}, h('h2', {}, title), body);

  // ---- charts ----------------------------------------------------------

  const palette = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];

  // chart draws series [{label, points: [[x, y], ...]}] on one x axis. The
  // figure's data-points says how many points of each series uPlot drew;
  // a table of the numbers sits under it (also for screen readers).
  function chart(title, xLabel, series) {
    series = series.filter((s) => s.points.length > 0);
    const fig = h('figure', { class: 'chart', 'data-chart': title });
    if (series.length === 0) {
      fig.append(h('figcaption', {}, title), h('p', { class: 'empty' }, 'no points yet'));
      return fig;
    }
    const xs = [...new Set(series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
    const data = [xs, ...series.map((s) => {
      const byX = new Map(s.points);
      return xs.map((x) => (byX.has(x) ? byX.get(x) : null));
    })];
    const plot = h('div', { class: 'plot' });
    const rows = xs.map((x, i) => [x, ...data.slice(1).map((col) => col[i])]);
    fig.append(h('figcaption', {}, title), plot,
      h('details', {}, h('summary', {}, 'numbers'),
        table([[xLabel, (r) => num(r[0])], ...series.map((s, j) => [s.label, (r) => num(r[j + 1], 4)])], rows)));
    // uPlot needs the width: draw once the figure is in the page.
    fig.draw = () => {
      const width = Math.max(320, plot.clientWidth || content.clientWidth - 48);
      new uPlot({ // eslint-disable-line no-new, no-undef
        width, height: 260,
        scales: { x: { time: false } },
        // Steps, iterations and generations are whole numbers.
        axes: [{ label: xLabel, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 1e5, 1e6] }, {}],
        legend: { live: false },
        cursor: { show: false },
        series: [{ label: xLabel }, ...series.map((s, i) => ({
          label: s.label, stroke: palette[i % palette.length], width: 2, spanGaps: true,
          points: { show: xs.length <= 40, size: 5 },
        }))],
        hooks: {
          draw: [(u) => {
            fig.dataset.points = u.series.slice(1).map((s, i) => `${s.label}:${u.data[i + 1].filter((v) => v !== null).length}`).join(',');
          }],
        },
      }, data, plot);
    };
    return fig;
  }

  // ---- pages -----------------------------------------------------------

  const workflowOf = {
    cluster: (name) => 'cluster/' + name, // workflows/cluster.WorkflowID
    loop: (cluster, config) => `selfplay/${cluster}/${config}`, // workflows/selfplay.WorkflowID
  };

  async function clustersPage() {
    const { clusters } = await api('/v1/clusters');
    const cards = await Promise.all((clusters || []).map(async (name) => {
      const [st, usage] = await Promise.all([api('/v1/clusters/' + enc(name)), apiOr('/v1/usage?cluster=' + enc(name), null)]);
      const t = st.totals || {};
      const health = Object.entries(t.by_health || {}).map(([k, v]) => `${v} ${k}`).join(', ');
      const nodes = table([
        ['node', (n) => h('strong', {}, n.name)],
        ['health', (n) => [badge(n.health), n.draining ? h('span', { class: 'note' }, ' draining: ' + (n.drain_reason || '')) : '', n.error ? h('div', { class: 'error-text' }, n.error) : '']],
        ['provider', (n) => [n.provider || '', n.ephemeral ? ' (ephemeral)' : '']],
        ['GPUs', (n) => ((n.resources || {}).gpus || []).map((g) => h('div', {}, `${g.index}: ${g.model}${g.vram_mb ? ' ' + mb(g.vram_mb) : ''}`))],
        ['GPUs used', (n) => { const all = ((n.resources || {}).gpus || []).length; return all ? `${((n.used || {}).gpus || []).length} / ${all}` : ''; }],
        ['GPU util', (n) => (n.gpu_util || []).map((u) => (u < 0 ? '?' : u + '%')).join(' ')], // -1: unknown
        ['CPUs used', (n) => `${num((n.used || {}).cpus, 1)} / ${num((n.resources || {}).cpus, 1)}`],
        ['memory used', (n) => `${mb((n.used || {}).memory_mb) || 0} / ${mb((n.resources || {}).memory_mb)}`],
        ['work', (n) => (n.jobs || []).map((j) => h('div', {}, j))],
        ['heartbeat', (n) => (n.last_heartbeat ? ago(n.last_heartbeat) + ' ago' : '')],
      ], st.nodes, (n) => ({ 'data-node': n.name }));
      let quotas = null;
      if (usage) {
        quotas = h('div', {},
          h('h3', {}, `Usage against quotas (last ${num(usage.window_hours, 0)} h of Tier-1 GPU time)`),
          table([
            ['config', (q) => q.config || '(none)'],
            ['Tier-1 share', (q) => [h('meter', { min: 0, max: q.quota || 1, value: q.tier1_share || 0 }), ' ', pct(q.tier1_share)]],
            ['quota', (q) => (q.quota ? pct(q.quota) : 'none')],
            ['Tier-1 GPU-hours', (q) => num((q.tier1_gpu_seconds || 0) / 3600)],
            ['running trainings', (q) => q.running_trainings],
          ], usage.quotas, (q) => ({ 'data-config': q.config }), 'no usage in the window'),
          h('h3', {}, 'Running'),
          table([
            ['work', (r) => (r.kind === 'training' || r.kind === 'run' ? runLink(r.work_id) : r.work_id)],
            ['kind', (r) => r.kind], ['config', (r) => r.config || ''], ['GPUs', (r) => num(r.gpus)],
            ['nodes', (r) => (r.nodes || []).join(', ')], ['for', (r) => ago(r.since)],
          ], usage.running, () => ({}), 'nothing running'));
      }
      return h('article', { class: 'card', 'data-cluster': name },
        h('h2', {}, name, ' ', badge(st.desired), st.busy ? h('span', { class: 'note' }, ' changing…') : '', ' ', temporalLink(workflowOf.cluster(name))),
        h('p', { class: 'totals' },
          `${t.nodes || 0} nodes${health ? ' (' + health + ')' : ''} · GPUs ${t.gpus_used || 0}/${t.gpus || 0} · CPUs ${num(t.cpus_used, 1)}/${num(t.cpus, 1)} · memory ${mb(t.memory_mb_used) || 0}/${mb(t.memory_mb)} · `,
          link('/ui/queue?cluster=' + enc(name), `${(st.queue || []).length} waiting`)),
        nodes, quotas);
    }));
    return [h('h1', {}, 'Clusters'), cards.length ? cards : h('p', { class: 'empty' }, 'No clusters: trainyard cluster up -f SPEC.yaml')];
  }

  async function queuePage() {
    const only = new URLSearchParams(location.search).get('cluster');
    const names = only ? [only] : ((await api('/v1/clusters')).clusters || []);
    const queues = await Promise.all(names.map((n) => api(`/v1/clusters/${enc(n)}/queue`)));
    return [h('h1', {}, 'Queue', only ? ` of ${only}` : ''), queues.map((q) => section(
      `${q.cluster}: ${(q.waiting || []).length} waiting, ${q.running} running`,
      table([
        ['#', (w) => w.position],
        ['work', (w) => [w.kind === 'run' ? runLink(w.id) : w.id, ' ', temporalLink(w.id)]],
        ['kind', (w) => w.kind],
        ['state', (w) => badge(w.state)],
        ['why it waits', (w) => h('span', { class: 'reason' }, w.reason)],
        ['waiting', (w) => ago(w.waiting_since)],
        ['priority', (w) => w.effective_priority],
        ['behind', (w) => (w.running || []).join(', ')],
      ], q.waiting, (w) => ({ 'data-id': w.id }), 'nothing waiting')))];
  }

  async function runsPage() {
    const { runs } = await api('/v1/runs?limit=200');
    return [h('h1', {}, 'Runs'), table([
      ['run', (r) => runLink(r.id)], ['name', (r) => r.name || ''], ['env', (r) => r.env || ''], ['cluster', (r) => r.cluster || ''],
      ['status', (r) => badge(r.status)], ['started', (r) => when(r.start_time)], ['ended', (r) => when(r.close_time)],
      ['', (r) => temporalLink(r.id)],
    ], runs, (r) => ({ 'data-id': r.id }), 'No runs yet: trainyard run train --cluster NAME --env CartPole-v1')];
  }

  // runCurves reads a run's curves: the stored scalars (tag → [{step, value}])
  // or, for a run without them, its progress.metrics (one per iteration).
  async function runCurves(run) {
    const sc = await apiOr(`/v1/runs/${enc(run.id)}/scalars`, null);
    if (sc && sc.tags && Object.keys(sc.tags).length > 0) {
      const tags = {};
      for (const [tag, pts] of Object.entries(sc.tags)) tags[tag] = pts.map((p) => [p.step, p.value]);
      return { source: `/v1/runs/${run.id}/scalars (S3 ${sc.prefix})`, tags };
    }
    const tags = {};
    for (const m of (run.progress || {}).metrics || []) {
      for (const [k, v] of Object.entries(m)) {
        if (typeof v !== 'number' || k === 'iteration') continue;
        if (k.startsWith('episode_') && !m.episodes) continue; // no episode ended: no value
        (tags[k] = tags[k] || []).push([m.iteration, v]);
      }
    }
    return { source: `progress.metrics of /v1/runs/${run.id}`, tags };
  }
  const curve = (c, tag) => ({ label: tag, points: c.tags[tag] || [] });
  // policiesOf names a multi-agent run's policies: its policy/<name>/... tags.
  const policiesOf = (c) => [...new Set(Object.keys(c.tags)
    .map((t) => (/^policy\/([^/]+)\/recent_return_mean$/.exec(t) || [])[1]).filter(Boolean))].sort();

  async function runPage(id) {
    const r = await api('/v1/runs/' + enc(id));
    const p = r.progress || {};
    const s = r.spec || {};
    const c = await runCurves(r);
    const out = [
      h('h1', {}, 'Run ', h('code', { 'data-run': r.id }, r.id), ' ', badge(r.status), ' ', temporalLink(r.id)),
      facts([
        ['name', r.name], ['cluster', r.cluster], ['env', r.env || s.env], ['algorithm', s.algorithm], ['config', s.config],
        ['state', p.state && [badge(p.state), ' ', p.reason || '']], ['iteration', p.iteration ? `${p.iteration}${s.iterations ? ' / ' + s.iterations : ''}` : ''],
        ['timesteps', num(p.timesteps)], ['mean return', num(p.mean_return)], ['best return', num(p.best_return)],
        ['target return', num(s.target_return)],
        ['evaluation', p.eval && `${num(p.eval.return_mean)} over ${p.eval.episodes} episodes (min ${num(p.eval.return_min)}, max ${num(p.eval.return_max)})`],
        ['nodes', (p.nodes || (p.node ? [p.node] : [])).join(', ')], ['checkpoint', p.checkpoint],
        ['placements', p.placements], ['failures', p.failures],
        ['started', when(r.start_time)], ['ended', when(r.close_time)],
        ['error', r.error && h('span', { class: 'error-text' }, r.error)],
      ]),
    ];
    if (Object.keys(c.tags).length > 0) {
      // A multi-agent run: each policy's return, and each trained one's losses.
      const policies = policiesOf(c);
      const byPolicy = (metric) => policies.map((p) => ({ label: p, points: c.tags[`policy/${p}/${metric}`] || [] }));
      const losses = policies.length === 0 ? ['policy_loss', 'value_loss', 'entropy'].map((t) => curve(c, t))
        : ['policy_loss', 'value_loss'].flatMap((k) => byPolicy(k).map((s) => ({ ...s, label: `${s.label} ${k}` })));
      out.push(section('Learning curves', h('div', { class: 'charts' },
        chart('Return', 'iteration', ['recent_return_mean', 'episode_return_mean'].map((t) => curve(c, t))),
        ...(policies.length > 0 ? [chart('Return by policy', 'iteration', byPolicy('recent_return_mean'))] : []),
        chart('Losses', 'iteration', losses)),
        h('p', { class: 'note', 'data-source': c.source.startsWith('/') ? 'scalars' : 'metrics' }, 'From ', h('code', {}, c.source), '.')));
    }
    if (p.output || r.live_output) out.push(section('Output', h('pre', {}, p.output || r.live_output)));
    return out;
  }

  async function sweepsPage() {
    const { sweeps } = await api('/v1/sweeps?limit=200');
    return [h('h1', {}, 'Sweeps'), table([
      ['sweep', (w) => link('/ui/sweeps/' + enc(w.id), w.id)], ['name', (w) => w.name || ''], ['env', (w) => w.env || ''],
      ['cluster', (w) => w.cluster || ''], ['status', (w) => badge(w.status)], ['started', (w) => when(w.start_time)],
      ['', (w) => temporalLink(w.id)],
    ], sweeps, (w) => ({ 'data-id': w.id }), 'No sweeps yet: trainyard sweep start -f SWEEP.yaml')];
  }

  async function sweepPage(id) {
    const w = await api('/v1/sweeps/' + enc(id));
    const res = w.progress || {};
    const trials = res.trials || [];
    const metric = res.metric || 'mean_return';
    // mean_return (the mean of the last 100 episodes) is the curve recent_return_mean.
    const tag = metric === 'mean_return' ? 'recent_return_mean' : metric;
    const label = (t) => `#${t.index} ${Object.entries(t.params || {}).map(([k, v]) => `${k}=${v}`).join(' ')}`;
    const curves = await Promise.all(trials.map(async (t) => {
      if (!t.run_id) return { label: label(t), points: [] };
      const run = await apiOr('/v1/runs/' + enc(t.run_id), null);
      if (!run) return { label: label(t), points: [] };
      const c = await runCurves(run);
      return { label: label(t), points: c.tags[tag] || [] };
    }));
    return [
      h('h1', {}, 'Sweep ', h('code', {}, w.id), ' ', badge(w.status), ' ', temporalLink(w.id)),
      facts([['name', w.name], ['cluster', w.cluster], ['env', w.env], ['state', res.state],
        ['trials', `${trials.length}: ${res.succeeded || 0} succeeded, ${res.completed || 0} completed, ${res.running || 0} running, ${res.pending || 0} pending, ${res.stopped || 0} stopped, ${res.failed || 0} failed`],
        ['ranked by', `${metric} (${res.mode || 'max'})`], ['error', w.error]]),
      section('Trials', chart(`Trials: ${tag}`, 'iteration', curves), table([
        ['#', (t) => t.index], ['run', (t) => (t.run_id ? runLink(t.run_id) : '')],
        ['params', (t) => Object.entries(t.params || {}).map(([k, v]) => `${k}=${v}`).join(' ')],
        ['state', (t) => badge(t.state)], ...(trials.some((t) => t.metric !== undefined) ? [[metric, (t) => num(t.metric)]] : []),
        ['mean return', (t) => num(t.mean_return)],
        ['best return', (t) => num(t.best_return)], ['iteration', (t) => t.iteration], ['why', (t) => t.reason || t.error || ''],
      ], trials, (t) => ({ 'data-id': t.run_id || '', class: t.index === res.best ? 'best' : null }))),
    ];
  }

  async function loopsPage() {
    const { loops } = await api('/v1/selfplay?limit=200');
    return [h('h1', {}, 'Self-play loops'), table([
      ['loop', (l) => link(`/ui/selfplay/${enc(l.cluster)}/${enc(l.config)}`, l.id)], ['status', (l) => badge(l.status)],
      ['phase', (l) => l.phase], ['generation', (l) => l.generation], ['best', (l) => l.best || ''], ['best Elo', (l) => num(l.best_elo, 0)],
      ['started', (l) => when(l.start_time)], ['', (l) => temporalLink(workflowOf.loop(l.cluster, l.config))],
    ], loops, (l) => ({ 'data-id': l.id }), 'No self-play loops yet: trainyard selfplay start --cluster NAME --config square8_2p')];
  }

  async function loopPage(cluster, config) {
    const [sp, lb] = await Promise.all([
      api(`/v1/selfplay/${enc(cluster)}/${enc(config)}`),
      api('/v1/selfplay/leaderboard?config=' + enc(config)),
    ]);
    const st = sp.state || {};
    const gens = st.generations || [];
    const board = ((lb.leaderboards || []).find((b) => b.config === config) || {}).entries || [];
    return [
      h('h1', {}, 'Self-play ', h('code', {}, `${cluster}/${config}`), ' ', badge(sp.status), ' ', temporalLink(workflowOf.loop(cluster, config))),
      facts([['phase', st.phase && [badge(st.phase), ' ', st.reason || '']], ['game', sp.game_plugin && h('code', { title: sp.game_plugin }, sp.game_plugin.slice(0, 12))],
        ['generations', `${st.completed || 0} completed${(sp.settings || {}).generations ? ' of ' + sp.settings.generations : ''}`],
        ['best', st.best], ['best Elo', num(sp.best_elo, 0)], ['Elo velocity', sp.elo_velocity ? num(sp.elo_velocity, 1) + ' Elo/day (last 7 days)' : ''],
        ['games', num(st.total_games)], ['node', st.node], ['error', sp.error]]),
      section('Elo by generation', chart('Elo', 'generation', [{ label: 'Elo', points: gens.filter((g) => g.elo).map((g) => [g.n, g.elo]) }]),
        table([
          ['generation', (g) => g.n], ['state', (g) => badge(g.state)], ['games', (g) => g.games], ['node', (g) => g.node || ''],
          ['quality', (g) => (g.quality ? `${num(g.quality.score)}${g.quality.passed ? '' : ' (failed)'}` : '')],
          ['positions', (g) => num(g.positions)], ['train loss', (g) => num(g.train_loss, 3)], ['model', (g) => g.model || ''],
          ['Elo', (g) => num(g.elo, 0)], ['promoted', (g) => (g.promoted ? 'yes' : '')], ['why', (g) => g.reason || ''],
        ], gens, (g) => ({ 'data-generation': g.n }), 'no generation yet')),
      section(`Leaderboard: ${config}`, table([
        ['#', (e) => board.indexOf(e) + 1], ['model', (e) => [e.model, e.best ? ' ★' : '', e.anchor ? ' (anchor)' : '']], ['Elo', (e) => num(e.elo, 0)],
        ['games', (e) => e.games], ['W/D/L', (e) => `${e.wins}/${e.draws}/${e.losses}`], ['loop', (e) => e.loop || ''], ['updated', (e) => when(e.updated)],
      ], board, (e) => ({ 'data-model': e.model, 'data-elo': Math.round(e.elo) }), 'no ratings yet')),
    ];
  }

  async function alertsPage() {
    const { alerts } = await api('/v1/alerts?all=true');
    return [h('h1', {}, 'Alerts'), h('p', { class: 'note' }, 'The alert table as the self-play populators evaluate it; pending conditions too.'), table([
      ['cluster', (a) => a.cluster], ['rule', (a) => a.rule], ['subject', (a) => a.subject], ['state', (a) => badge(a.state)],
      ['condition', (a) => a.condition], ['value', (a) => num(a.value)], ['since', (a) => when(a.since)],
    ], alerts, (a) => ({ 'data-rule': a.rule }), 'No alerts.')];
  }

  // ---- routing and sign-in --------------------------------------------

  const routes = [
    [/^\/ui\/?$/, 'clusters', clustersPage],
    [/^\/ui\/clusters\/?$/, 'clusters', clustersPage],
    [/^\/ui\/queue\/?$/, 'queue', queuePage],
    [/^\/ui\/runs\/?$/, 'runs', runsPage],
    [/^\/ui\/runs\/(.+)$/, 'runs', runPage],
    [/^\/ui\/sweeps\/?$/, 'sweeps', sweepsPage],
    [/^\/ui\/sweeps\/(.+)$/, 'sweeps', sweepPage],
    [/^\/ui\/selfplay\/?$/, 'selfplay', loopsPage],
    [/^\/ui\/selfplay\/([^/]+)\/([^/]+)$/, 'selfplay', loopPage],
    [/^\/ui\/alerts\/?$/, 'alerts', alertsPage],
  ];

  function signInForm(message) {
    const input = h('input', { type: 'password', name: 'token', autocomplete: 'current-password', placeholder: 'ty_…', required: true, size: 48 });
    const remember = h('input', { type: 'checkbox', name: 'remember' });
    const err = h('p', { class: 'error-text' }, message || '');
    const form = h('form', { class: 'signin', onsubmit: async (ev) => {
      ev.preventDefault();
      const tok = input.value.trim();
      try {
        await api('/v1/whoami', tok);
      } catch (e) {
        err.textContent = e.status === 401 ? 'Unknown or revoked token.' : e.message;
        return;
      }
      (remember.checked ? localStorage : sessionStorage).setItem(TOKEN_KEY, tok);
      render();
    } },
    h('h1', {}, 'Sign in'),
    h('p', {}, 'With a Trainyard API token (role viewer or higher; `trainyard dev` writes an admin token to DATA/admin.token).'),
    h('label', {}, 'Token ', input), h('label', {}, remember, ' remember on this device'),
    h('button', { type: 'submit' }, 'Sign in'), err);
    return form;
  }

  async function render() {
    document.body.dataset.state = 'loading';
    const route = routes.find(([re]) => re.test(location.pathname));
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', !!route && a.dataset.nav === route[1]);
    const who = document.getElementById('who');
    who.replaceChildren();
    if (!token()) {
      content.replaceChildren(signInForm());
      document.body.dataset.state = 'signin';
      return;
    }
    content.replaceChildren(h('p', { class: 'note' }, 'Loading…'));
    try {
      const me = await api('/v1/whoami');
      who.append(`${me.name || me.id} (${me.role}) `, h('button', { type: 'button', onclick: () => { signOut(); render(); } }, 'Sign out'));
      if (!route) throw new APIError(404, 'No such page: ' + location.pathname);
      const args = location.pathname.match(route[0]).slice(1).map(decodeURIComponent);
      const page = await route[2](...args);
      content.replaceChildren(...[page].flat(Infinity));
      for (const fig of content.querySelectorAll('figure.chart')) if (fig.draw) fig.draw();
      document.body.dataset.state = 'ready';
    } catch (e) {
      if (e.status === 401) {
        signOut();
        content.replaceChildren(signInForm('The token was refused (401): sign in again.'));
        document.body.dataset.state = 'signin';
        return;
      }
      content.replaceChildren(h('div', { class: 'error' }, e.message));
      document.body.dataset.state = 'error';
    }
  }

  takeFragmentToken();
  render();
})();
