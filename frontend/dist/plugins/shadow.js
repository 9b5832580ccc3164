// Shadow: the candidate model beside the live one, drawn — a confusion matrix of verdicts per
// kind, the confidence histograms side by side, the flipped items (linked to their pages), a
// scatter of live vs candidate art, the songs whose rank would move most — with Promote and
// Rollback; and the drift runs of the anchor set against the live model (the history chart,
// its alert threshold a red line, drifted runs marked) with the anchor set itself.
// Data: GET /api/admin/shadow, POST /api/admin/shadow/promote, POST /api/admin/shadow/rollback,
// GET/POST /api/admin/anchors, DELETE /api/admin/anchors/{id}.

import { html, render, useState } from '../vendor/preact-htm.js';
import { fmt } from '../lib/fmt.js';
import { useLive, useNow, Rel, Badge, Stat, LoadError, Loading, Empty, TableWrap, Confirm } from '../lib/ui.js';

const VERDICTS = ['allow', 'block'];
const KINDS = ['revision', 'comment', 'pitch'];

const share = (v) => (v == null ? '—' : (v * 100).toFixed(1) + '%');
const fixed = (v, n = 3) => (v == null ? '—' : Number(v).toFixed(n));
const signed = (v, n = 3) => (v == null ? '—' : (v > 0 ? '+' : '') + Number(v).toFixed(n));
const itemHref = (kind, id) => `/admin/items/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`;

function Shadow({ ctx }) {
  const live = useLive(ctx, () => ctx.api('/api/admin/shadow'), 10000);
  const d = live.data || {};
  return html`<div class="stack" data-testid="shadow">
    <${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} />
    ${!live.data && !live.error ? html`<${Loading} />` : null}
    ${live.data
      ? html`<${Models} ctx=${ctx} d=${d} refresh=${live.refresh} />
          <${Screens} s=${d.screens} candidate=${d.candidate} />
          <${Scores} s=${d.scores} candidate=${d.candidate} />
          <${Drift} drift=${d.drift} />`
      : null}
    <${Anchors} ctx=${ctx} onChange=${live.refresh} />
  </div>`;
}

/* ---- The two models, the range compared, Promote and Rollback ------------------------- */

function modelName(m) {
  if (!m) return '—';
  return [m.model, m.rubric].filter(Boolean).join(' · ');
}

function Models({ ctx, d, refresh }) {
  const now = useNow(30000);
  const [asking, setAsking] = useState(null); // 'promote' | 'rollback'
  const [busy, setBusy] = useState(false);
  const cand = d.candidate || null;
  const calls = d.calls || null;
  const act = async (what) => {
    setBusy(true);
    try {
      await ctx.api('/api/admin/shadow/' + what, { method: 'POST' });
      ctx.notify(what === 'promote' ? `Promoted ${modelName(cand)}: it is live; songs scored by the old rubric are re-scored as a backfill.` : 'Rolled back to the previous live model.', 'ok');
      refresh();
    } catch (e) {
      ctx.notify(`Could not ${what}: ${e.message}`, 'error');
    } finally {
      setBusy(false);
      setAsking(null);
    }
  };
  const question = asking === 'promote'
    ? `Make ${modelName(cand)} the live model? Songs scored by ${(d.live && d.live.rubric) || 'the live rubric'} are re-scored as owed work.`
    : 'Roll back to the previous live model? Songs are re-scored under its rubric as owed work.';
  return html`<section class="card" aria-labelledby="sh-models-h" data-testid="shadow-models">
    <header class="card-head"><h2 id="sh-models-h">Live and candidate</h2>
      <span class="muted small" data-testid="shadow-range">${d.from ? html`compared from <${Rel} at=${d.from} now=${now} /> to <${Rel} at=${d.to} now=${now} />` : 'nothing compared yet'}</span>
    </header>
    <div class="stats stats-tight">
      <${Stat} label="Live" value=${modelName(d.live)} testid="shadow-live"
        sub=${html`${d.live && d.live.api ? html`<span>api ${d.live.api}</span>` : null}${d.promoted ? html` <${Badge} kind="warn">promoted<//>` : null}`} />
      <${Stat} label="Candidate" value=${cand ? modelName(cand) : 'none'} testid="shadow-candidate"
        sub=${cand ? html`<span>api ${cand.api || '—'}</span>${cand.since ? html`<span>· since <${Rel} at=${cand.since} now=${now} /></span>` : null}` : html`<span>set OWED_SHADOW_MODEL_URL or OWED_SHADOW_RUBRIC</span>`} />
      <${Stat} label="Shadow calls today" value=${calls ? `${fmt.number(calls.today)} / ${fmt.number(calls.dailyLimit)}` : '—'} testid="shadow-calls"
        sub=${calls ? html`<span>${fmt.number(calls.owed)} owed</span>` : null} />
      <${Stat} label="Compared" value=${`${fmt.number((d.screens && d.screens.compared) || 0)} screens · ${fmt.number((d.scores && d.scores.compared) || 0)} scores`} testid="shadow-compared" />
    </div>
    <${Rescore} r=${d.rescore} now=${now} />
    ${asking
      ? html`<${Confirm} text=${question} confirmLabel=${asking === 'promote' ? 'Promote' : 'Roll back'} danger=${asking === 'rollback'} busy=${busy}
          onConfirm=${() => act(asking)} onCancel=${() => setAsking(null)} testid=${'shadow-' + asking + '-confirm'} />`
      : html`<div class="row">
          <button type="button" class="btn btn-primary" disabled=${!cand || d.promoted || busy} onClick=${() => setAsking('promote')} data-testid="shadow-promote"
            title=${!cand ? 'no candidate is set' : d.promoted ? 'the candidate is live already' : 'make the candidate live, re-scoring old songs'}>Promote the candidate</button>
          <button type="button" class="btn" disabled=${!d.promoted || busy} onClick=${() => setAsking('rollback')} data-testid="shadow-rollback"
            title=${d.promoted ? 'make the configured model live again' : 'the configured model is live'}>Roll back</button>
        </div>`}
  </section>`;
}

/** The re-score of songs under the live rubric: progress, and while under way its rate and ETA. */
function Rescore({ r, now }) {
  if (!r || !r.total) return null;
  const left = r.total - r.done;
  return html`<p class="muted small" data-testid="shadow-rescore">
    <strong>${fmt.number(r.done)} of ${fmt.number(r.total)}</strong> scored songs under ${r.rubric}${left > 0
      ? html` · re-scoring ${fmt.number(left)} as a backfill · ${r.rowsPerMinute != null ? `${r.rowsPerMinute.toFixed(1)} a minute` : 'rate not known yet'}${r.eta
        ? html` · done <${Rel} at=${r.eta} now=${now} />` : null}`
      : ''}
  </p>`;
}

/* ---- Screens: confusion matrices, confidence histograms, flips ------------------------ */

function Screens({ s, candidate }) {
  const now = useNow(30000);
  s = s || {};
  const byKind = s.byKind || [];
  const flips = s.flips || [];
  return html`<section class="card" aria-labelledby="sh-screens-h" data-testid="shadow-screens">
    <header class="card-head"><h2 id="sh-screens-h">Screens</h2>
      <span class="muted small">${fmt.number(s.compared || 0)} verdicts compared · agreement <strong data-testid="shadow-agreement">${share(s.agreement)}</strong></span>
    </header>
    ${!candidate && !s.compared ? html`<${Empty}>No candidate: set one and every live screen also owes a shadow call, compared here.<//>` : null}
    ${byKind.length
      ? html`<div class="sh-grid">${byKind.map((k) => html`<${Matrix} k=${k} key=${k.kind} />`)}
          ${s.confidence ? html`<${Histogram} c=${s.confidence} />` : null}</div>`
      : null}
    ${flips.length
      ? html`<h3 class="small-h">Flipped verdicts <span class="muted">(${flips.length}${flips.length >= 50 ? ', the newest 50' : ''})</span></h3>
        <${TableWrap} label="Flipped verdicts">
          <table class="table table-compact" data-testid="shadow-flips">
            <thead><tr><th scope="col">Item</th><th scope="col">Live</th><th scope="col">Candidate</th><th scope="col" class="num">Confidence</th><th scope="col">When</th></tr></thead>
            <tbody>${flips.map((f) => html`<tr key=${f.kind + f.id}>
              <td><a href=${itemHref(f.kind, f.id)} data-testid=${'shadow-flip-' + f.kind + '-' + f.id}>${f.kind} #${f.id}</a></td>
              <td><${Badge} kind=${f.live === 'allow' ? 'ok' : 'err'}>${f.live}<//></td>
              <td><${Badge} kind=${f.candidate === 'allow' ? 'ok' : 'err'}>${f.candidate}<//></td>
              <td class="num">${fixed(f.liveConfidence, 2)} → ${fixed(f.candidateConfidence, 2)}</td>
              <td><${Rel} at=${f.at} now=${now} /></td>
            </tr>`)}</tbody>
          </table>
        <//>`
      : null}
  </section>`;
}

/** A confusion matrix as a table: rows the live verdict, columns the candidate's. */
function Matrix({ k }) {
  const t = k.table || {};
  const cell = (l, c) => (t[l] && t[l][c]) || 0;
  const total = VERDICTS.reduce((a, l) => a + VERDICTS.reduce((b, c) => b + cell(l, c), 0), 0);
  const tone = (l, c) => {
    const v = cell(l, c);
    if (!v) return 'sh-cell sh-zero';
    const q = Math.min(3, Math.ceil((v / Math.max(1, total)) * 4)); // 1..3: how much of the kind
    return `sh-cell ${l === c ? 'sh-agree' : 'sh-flip'} sh-q${q}`;
  };
  return html`<figure class="sh-fig" data-testid=${'shadow-matrix-' + k.kind}>
    <figcaption><strong>${k.kind}</strong> <span class="muted small">${fmt.number(k.compared)} compared</span></figcaption>
    <table class="sh-matrix">
      <caption class="sr-only">${k.kind}: live verdicts by row, the candidate's by column</caption>
      <thead><tr><td></td>${VERDICTS.map((c) => html`<th scope="col">candidate ${c}</th>`)}</tr></thead>
      <tbody>${VERDICTS.map((l) => html`<tr><th scope="row">live ${l}</th>
        ${VERDICTS.map((c) => html`<td class=${tone(l, c)} data-testid=${`shadow-cell-${k.kind}-${l}-${c}`}
          title=${`live ${l}, candidate ${c}: ${cell(l, c)} of ${total}`}>${fmt.number(cell(l, c))}</td>`)}</tr>`)}</tbody>
    </table>
  </figure>`;
}

/** Confidence histograms side by side: each bin's share of its model's verdicts. */
function Histogram({ c }) {
  const bins = c.bins || [];
  const a = c.live || [];
  const b = c.candidate || [];
  const n = Math.max(a.length, b.length, bins.length - 1, 0);
  if (!n) return null;
  const sa = a.reduce((x, v) => x + v, 0) || 1;
  const sb = b.reduce((x, v) => x + v, 0) || 1;
  const peak = Math.max(0.01, ...a.map((v) => v / sa), ...b.map((v) => v / sb));
  const W = 300, H = 150, L = 4, B = 18, colW = (W - L) / n;
  const y = (v) => (H - B) * (1 - v / peak);
  const bar = (cls, i, v, total, off, who) => {
    const h = H - B - y(v / total);
    return html`<rect class=${cls} x=${L + i * colW + off} y=${y(v / total)} width=${colW / 2 - 1} height=${Math.max(0, h)}>
      <title>${who}, confidence ${fixed(bins[i], 1)}–${fixed(bins[i + 1], 1)}: ${v} (${share(v / total)})</title></rect>`;
  };
  return html`<figure class="sh-fig" data-testid="shadow-confidence">
    <figcaption><strong>Confidence</strong> <span class="sh-keys"><${Key} cls="sh-live" /> live <${Key} cls="sh-cand" /> candidate</span></figcaption>
    <svg class="sh-svg" viewBox=${`0 0 ${W} ${H}`} role="img" aria-label=${`Confidence of live and candidate verdicts, ${n} bins from 0 to 1: live peaks at ${peakBin(a, bins)}, the candidate at ${peakBin(b, bins)}`}>
      <line class="sh-axis" x1=${L} x2=${W} y1=${H - B} y2=${H - B} />
      ${Array.from({ length: n }, (_, i) => html`<g>${bar('sh-live', i, a[i] || 0, sa, 0.5, 'live')}${bar('sh-cand', i, b[i] || 0, sb, colW / 2, 'candidate')}</g>`)}
      ${[0, 0.5, 1].map((v) => html`<text class="sh-label" x=${L + v * (W - L)} y=${H - 4} font-size="10" text-anchor=${v === 0 ? 'start' : v === 1 ? 'end' : 'middle'}>${v}</text>`)}
    </svg>
  </figure>`;
}

function peakBin(vals, bins) {
  let best = -1, at = 0;
  vals.forEach((v, i) => {
    if (v > best) (best = v), (at = i);
  });
  return best > 0 ? `${fixed(bins[at], 1)}–${fixed(bins[at + 1], 1)}` : 'nothing';
}

function Key({ cls }) {
  return html`<svg class="sh-key" viewBox="0 0 10 10" aria-hidden="true"><rect class=${cls} x="0" y="0" width="10" height="10" /></svg>`;
}

/* ---- Scores: scatter of live vs candidate art, rank shifts ---------------------------- */

function Scores({ s, candidate }) {
  s = s || {};
  const points = s.points || [];
  const movers = s.movers || [];
  return html`<section class="card" aria-labelledby="sh-scores-h" data-testid="shadow-scores">
    <header class="card-head"><h2 id="sh-scores-h">Scores</h2>
      <span class="muted small">${fmt.number(s.compared || 0)} songs compared</span>
    </header>
    <div class="stats stats-tight">
      <${Stat} label="Mean difference" value=${signed(s.meanDiff)} testid="shadow-mean-diff" sub=${html`<span>candidate − live art</span>`} />
      <${Stat} label="Spread of the difference" value=${fixed(s.spreadDiff)} testid="shadow-spread-diff" />
      <${Stat} label="Rank correlation" value=${fixed(s.spearman)} testid="shadow-spearman" sub=${html`<span>Spearman, the public list</span>`} />
    </div>
    ${!candidate && !s.compared ? html`<${Empty}>No candidate: nothing scored twice yet.<//>` : null}
    ${points.length || movers.length
      ? html`<div class="sh-grid">${points.length ? html`<${Scatter} points=${points} />` : null}
          ${movers.length ? html`<${Movers} movers=${movers} />` : null}</div>`
      : null}
  </section>`;
}

function Scatter({ points }) {
  const W = 260, P = 24;
  const x = (v) => P + v * (W - 2 * P);
  const y = (v) => W - P - v * (W - 2 * P);
  const off = points.filter((p) => Math.abs(p.candidate - p.live) > 0.06).length;
  return html`<figure class="sh-fig" data-testid="shadow-scatter">
    <figcaption><strong>Art, live vs candidate</strong> <span class="muted small">${off} of ${points.length} off the diagonal by more than 0.06</span></figcaption>
    <svg class="sh-svg sh-square" viewBox=${`0 0 ${W} ${W}`} role="img" aria-label=${`Scatter of ${points.length} songs' art: live across, candidate up; ${off} differ by more than 0.06`}>
      <rect class="sh-frame" x=${P} y=${P} width=${W - 2 * P} height=${W - 2 * P} />
      <line class="sh-diag" x1=${x(0)} y1=${y(0)} x2=${x(1)} y2=${y(1)} />
      ${points.map((p) => html`<circle class=${Math.abs(p.candidate - p.live) > 0.06 ? 'sh-pt sh-pt-off' : 'sh-pt'} cx=${x(p.live)} cy=${y(p.candidate)} r="3">
        <title>song ${p.songId}: live ${fixed(p.live)}, candidate ${fixed(p.candidate)}</title></circle>`)}
      <text class="sh-label" x=${W / 2} y=${W - 6} font-size="10" text-anchor="middle">live art</text>
      <text class="sh-label" x="10" y=${W / 2} font-size="10" text-anchor="middle" transform=${`rotate(-90 10 ${W / 2})`}>candidate art</text>
      <text class="sh-label" x=${P} y=${W - P + 12} font-size="9" text-anchor="middle">0</text>
      <text class="sh-label" x=${W - P} y=${W - P + 12} font-size="9" text-anchor="middle">1</text>
    </svg>
  </figure>`;
}

/** The rank shift of the movers: one bar per song, up (ranked higher) or down. */
function Movers({ movers }) {
  const shown = movers.slice(0, 12);
  const most = Math.max(1, ...shown.map((m) => Math.abs(m.shift)));
  return html`<figure class="sh-fig" data-testid="shadow-movers">
    <figcaption><strong>Rank shift</strong> <span class="muted small">the ${shown.length} songs that would move most (of ${movers.length})</span></figcaption>
    <ol class="sh-movers">${shown.map((m) => {
      const up = m.candidateRank < m.liveRank;
      const pct = (Math.abs(m.shift) / most) * 50;
      return html`<li key=${m.songId} data-testid=${'shadow-mover-' + m.songId}>
        <span class="sh-mover-title" title=${m.title}>${m.title || 'song ' + m.songId}</span>
        <svg class="sh-shift" viewBox="0 0 100 10" preserveAspectRatio="none" role="img" aria-label=${`${m.title || 'song ' + m.songId}: rank ${m.liveRank} to ${m.candidateRank}`}>
          <line class="sh-axis" x1="50" x2="50" y1="0" y2="10" />
          <rect class=${up ? 'sh-up' : 'sh-down'} x=${up ? 50 : 50 - pct} y="1" width=${pct} height="8" />
        </svg>
        <span class="num small">${m.liveRank} → ${m.candidateRank}</span>
      </li>`;
    })}</ol>
  </figure>`;
}

/* ---- Drift: the history chart and the runs -------------------------------------------- */

function Drift({ drift }) {
  const now = useNow(30000);
  if (!drift) return null;
  const runs = drift.runs || [];
  const last = runs[0];
  const drifted = runs.filter((r) => r.drifted).length;
  return html`<section class="card" aria-labelledby="sh-drift-h" data-testid="shadow-drift">
    <header class="card-head"><h2 id="sh-drift-h">Drift of the live model</h2>
      <span class="muted small">the anchor set re-run every ${drift.every}</span>
    </header>
    <div class="stats stats-tight">
      <${Stat} label="Anchors" value=${fmt.number(drift.anchors)} testid="shadow-drift-anchors" />
      <${Stat} label="Last run" testid="shadow-drift-last" kind=${last ? (last.drifted ? 'err' : 'ok') : null}
        value=${last ? (last.drifted ? 'drifted' : 'within bounds') : 'none yet'}
        sub=${last ? html`<span><${Rel} at=${last.at} now=${now} /> · ${last.compared} compared</span>` : html`<span>add anchors below</span>`} />
      <${Stat} label="Agreement" value=${last ? share(last.agreement) : '—'} testid="shadow-drift-agreement" sub=${html`<span>alert below ${share(drift.alert)}</span>`} />
      <${Stat} label="Mean art shift" value=${last ? fixed(last.meanArtShift) : '—'} testid="shadow-drift-shift" sub=${html`<span>alert above ${fixed(drift.artShiftMax != null ? drift.artShiftMax : 0.06, 2)}</span>`} />
    </div>
    ${runs.length
      ? html`<div class="sh-grid">
          <${History} runs=${runs} value="agreement" label="Agreement on verdict anchors" limit=${drift.alert} top=${1} below testid="shadow-drift-chart" />
          <${History} runs=${runs} value="meanArtShift" label="Mean art shift" limit=${drift.artShiftMax != null ? drift.artShiftMax : 0.06}
            top=${Math.max(0.12, ...runs.map((r) => (r.meanArtShift || 0) * 1.2))} testid="shadow-drift-art-chart" />
        </div>
        <p class="muted small" data-testid="shadow-drift-summary">${runs.length} runs shown, ${drifted} drifted${runs.some((r) => r.alerted) ? ', each ▲ raised model.drift' : ''}.</p>`
      : html`<${Empty}>No drift run yet: runs need anchors and a model that answers; one that cannot complete records nothing.<//>`}
  </section>`;
}

/** One measure of the drift runs over time (oldest left), the alert threshold a red line. */
function History({ runs, value, label, limit, top, below, testid }) {
  const rs = runs.slice().reverse();
  const W = 320, H = 150, L = 30, R = 6, T = 8, B = 16;
  const n = rs.length;
  const x = (i) => (n === 1 ? (L + W - R) / 2 : L + (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - Math.min(v, top) / top);
  const pts = rs.map((r, i) => (r[value] == null ? null : [x(i), y(r[value])]));
  const path = pts.filter(Boolean).map((p, i) => (i ? 'L' : 'M') + p[0].toFixed(1) + ' ' + p[1].toFixed(1)).join(' ');
  const out = rs.filter((r) => r.drifted).length;
  return html`<figure class="sh-fig" data-testid=${testid}>
    <figcaption><strong>${label}</strong> <span class="sh-keys"><${Key} cls="sh-ok-dot" /> in bounds <${Key} cls="sh-drifted" /> drifted</span></figcaption>
    <svg class="sh-svg" viewBox=${`0 0 ${W} ${H}`} role="img"
      aria-label=${`${label} over the last ${n} runs: the alert line at ${limit}, ${out} runs drifted`}>
      <line class="sh-axis" x1=${L} x2=${W - R} y1=${H - B} y2=${H - B} />
      <text class="sh-label" x=${L - 4} y=${y(top) + 4} font-size="10" text-anchor="end">${top >= 1 ? '100%' : fixed(top, 2)}</text>
      <text class="sh-label" x=${L - 4} y=${H - B} font-size="10" text-anchor="end">0</text>
      ${rs.map((r, i) => (r.drifted ? html`<rect class="sh-band" x=${x(i) - 3} y=${T} width="6" height=${H - T - B} />` : null))}
      <line class="sh-alert" x1=${L} x2=${W - R} y1=${y(limit)} y2=${y(limit)} data-testid=${testid + '-alert'} data-value=${limit} />
      <text class="sh-alert-label" x=${W - R} y=${below ? y(limit) + 11 : y(limit) - 3} font-size="10" text-anchor="end">alert ${top >= 1 ? share(limit) : fixed(limit, 2)}</text>
      ${path ? html`<path class="sh-line" d=${path} />` : null}
      ${rs.map((r, i) => (pts[i]
        ? html`<g data-testid=${r.drifted ? testid + '-drifted' : testid + '-run'}>
            <circle class=${r.drifted ? 'sh-drifted' : 'sh-ok-dot'} cx=${pts[i][0]} cy=${pts[i][1]} r=${r.drifted ? 4 : 3}>
              <title>${fmt.time(r.at)}: ${value === 'agreement' ? share(r[value]) : fixed(r[value])}${r.drifted ? ' — drifted' : ''}${r.alerted ? ' (raised model.drift)' : ''}</title></circle>
            ${r.alerted ? html`<text class="sh-alert-label" x=${pts[i][0]} y=${T + 8} font-size="10" text-anchor="middle">▲</text>` : null}
          </g>`
        : null))}
    </svg>
  </figure>`;
}

/* ---- The anchor set ------------------------------------------------------------------- */

function Anchors({ ctx, onChange }) {
  const live = useLive(ctx, () => ctx.api('/api/admin/anchors'), 30000);
  const now = useNow(30000);
  const anchors = (live.data && live.data.anchors) || [];
  const [form, setForm] = useState({ kind: 'pitch', itemId: '', verdict: 'allow', art: '' });
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState(null);
  const [asking, setAsking] = useState(null); // anchor id whose delete is being confirmed
  const set = (k) => (e) => setForm({ ...form, [k]: e.currentTarget.value });
  const inv = (f) => !!(err && err.field === f);

  const add = async (ev) => {
    ev.preventDefault();
    const body = { kind: form.kind, itemId: Number(form.itemId) };
    if (form.verdict) body.verdict = form.verdict;
    if (form.art.trim() !== '') body.art = Number(form.art);
    if (!Number.isInteger(body.itemId) || body.itemId < 1) return setErr({ field: 'itemId', message: "Enter the item's id." });
    if (!body.verdict && body.art === undefined) return setErr({ field: 'verdict', message: 'Give the expected verdict, the reference art, or both.' });
    setBusy('add');
    setErr(null);
    try {
      const r = await ctx.api('/api/admin/anchors', { method: 'POST', body });
      if (r && r.anchor) live.setData((d) => ({ anchors: [...((d && d.anchors) || []), r.anchor] }));
      setForm({ ...form, itemId: '', art: '' });
      ctx.notify(`Anchored ${body.kind} #${body.itemId}.`, 'ok');
      onChange();
    } catch (x) {
      setErr({ field: x.field || null, message: x.message });
    } finally {
      setBusy(null);
    }
  };
  const remove = async (a) => {
    setBusy('delete:' + a.id);
    try {
      await ctx.api(`/api/admin/anchors/${encodeURIComponent(a.id)}`, { method: 'DELETE' });
      live.setData((d) => ({ anchors: ((d && d.anchors) || []).filter((x) => x.id !== a.id) }));
      ctx.notify(`Anchor ${a.id} deleted.`, 'ok');
      onChange();
    } catch (x) {
      ctx.notify(`Could not delete anchor ${a.id}: ${x.message}`, 'error');
    } finally {
      setBusy(null);
      setAsking(null);
    }
  };
  return html`<section class="card card-flush" aria-labelledby="sh-anchors-h" data-testid="shadow-anchors">
    <header class="card-head card-pad"><h2 id="sh-anchors-h">Anchor set</h2><span class="muted small">${live.data ? `${anchors.length} anchors` : ''}</span></header>
    <div class="card-pad">
      <${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} />
      <form class="form form-row" onSubmit=${add} novalidate data-testid="anchor-form">
        <div class="field"><label for="sh-kind">Kind</label>
          <select id="sh-kind" value=${form.kind} onChange=${set('kind')} data-testid="anchor-kind">${KINDS.map((k) => html`<option value=${k}>${k}</option>`)}</select></div>
        <div class=${'field field-narrow' + (inv('itemId') ? ' field-invalid' : '')}><label for="sh-item">Item id</label>
          <input id="sh-item" inputmode="numeric" value=${form.itemId} onInput=${set('itemId')} aria-invalid=${inv('itemId') ? 'true' : 'false'} data-testid="anchor-item" /></div>
        <div class=${'field' + (inv('verdict') ? ' field-invalid' : '')}><label for="sh-verdict">Expected verdict</label>
          <select id="sh-verdict" value=${form.verdict} onChange=${set('verdict')} data-testid="anchor-verdict">
            <option value="">none</option>${VERDICTS.map((v) => html`<option value=${v}>${v}</option>`)}</select></div>
        <div class=${'field field-narrow' + (inv('art') ? ' field-invalid' : '')}><label for="sh-art">Reference art</label>
          <input id="sh-art" inputmode="decimal" placeholder="0–1, revisions" value=${form.art} onInput=${set('art')} aria-invalid=${inv('art') ? 'true' : 'false'} data-testid="anchor-art" /></div>
        <div class="field field-actions"><button type="submit" class="btn btn-primary" disabled=${!!busy} data-testid="anchor-add">${busy === 'add' ? 'Adding…' : 'Add anchor'}</button></div>
        ${err ? html`<p class="field-error field-full" role="alert" data-testid="anchor-error">${err.message}</p>` : null}
      </form>
    </div>
    ${!live.data && !live.error ? html`<div class="card-pad"><${Loading} /></div>` : null}
    ${live.data && !anchors.length ? html`<div class="card-pad"><${Empty}>No anchor yet: add items whose verdict or art you trust; a few dozen is typical.<//></div>` : null}
    ${anchors.length
      ? html`<${TableWrap} label="Anchors">
          <table class="table table-compact" data-testid="anchors-table">
            <thead><tr><th scope="col" class="num">ID</th><th scope="col">Item</th><th scope="col">Verdict</th><th scope="col" class="num">Art</th><th scope="col">Added</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>${anchors.map((a) => html`<tr key=${a.id} data-testid=${'anchor-row-' + a.id}>
              <td class="num">${a.id}</td>
              <td><a href=${itemHref(a.kind, a.itemId)}>${a.kind} #${a.itemId}</a></td>
              <td>${a.verdict ? html`<${Badge} kind=${a.verdict === 'allow' ? 'ok' : 'err'}>${a.verdict}<//>` : html`<span class="muted">—</span>`}</td>
              <td class="num">${fixed(a.art)}</td>
              <td><${Rel} at=${a.createdAt} now=${now} /></td>
              <td class="actions">${asking === a.id
                ? html`<button type="button" class="btn btn-small btn-danger" disabled=${!!busy} onClick=${() => remove(a)} data-testid=${'anchor-delete-confirm-' + a.id}>Confirm delete</button>
                    <button type="button" class="btn btn-small btn-quiet" onClick=${() => setAsking(null)}>Cancel</button>`
                : html`<button type="button" class="btn btn-small btn-quiet btn-danger-quiet" disabled=${!!busy} onClick=${() => setAsking(a.id)} data-testid=${'anchor-delete-' + a.id}>Delete</button>`}</td>
            </tr>`)}</tbody>
          </table>
        <//>`
      : null}
  </section>`;
}

export default {
  id: 'shadow',
  title: 'Shadow',
  mount(el, ctx) {
    render(html`<${Shadow} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
