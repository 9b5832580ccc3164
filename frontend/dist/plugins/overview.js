// Overview: health, the model's breaker and calls in flight, the owed jobs by why, jobs settled
// per minute over the last hour, and a backfill summary. Data: GET /api/admin/stats and
// GET /api/admin/model every 5 s.

import { html, render, useState, useEffect, useRef } from '../vendor/preact-htm.js';
import { fmt } from '../lib/fmt.js';
import { useLive, useNow, Rel, Badge, LoadError, Loading, Stat, HBar, WHYS, whyInfo } from '../lib/ui.js';

function Overview({ ctx }) {
  const live = useLive(ctx, () => ctx.api('/api/admin/stats'), 5000);
  const s = live.data;
  if (!s) {
    return html`<div class="stack">
      <${LoadError} error=${live.error} retry=${live.refresh} />
      ${live.error ? null : html`<${Loading} />`}
    </div>`;
  }
  const jobs = s.jobs || {};
  return html`<div class="stack">
    <${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} />
    <div class="stats" data-testid="overview-stats">
      <${ModelStat} ctx=${ctx} />
      <${Stat} label="Owed jobs" value=${fmt.number(jobs.total)} testid="stat-jobs-total"
        sub=${`screen ${fmt.number(jobs.byTask && jobs.byTask.screen)} · score ${fmt.number(jobs.byTask && jobs.byTask.score)}`} />
      <${Stat} label="Due now" value=${fmt.number(jobs.due)} testid="stat-jobs-due" kind=${jobs.due > 0 ? 'warn' : null} sub="held work is not due" />
      <${Stat} label="Held" value=${fmt.number(jobs.held || 0)} testid="stat-jobs-held" kind=${jobs.held > 0 ? 'info' : null} sub="claimed by no one until lifted" />
      <${Stat} label="Leased" value=${fmt.number(jobs.leased)} testid="stat-jobs-leased" sub="jobs running, every replica" />
      <${Stat} label="Oldest due" value=${jobs.oldestDueAt ? html`<${Rel} at=${jobs.oldestDueAt} />` : '—'} testid="stat-oldest-due" />
      <${Stat} label="Backfill pending" value=${fmt.number(s.backfill && s.backfill.pending)} testid="stat-backfill-pending"
        sub=${s.backfill ? fmt.rate(s.backfill.perMinute) : null} />
      <${Health} health=${s.health} version=${s.version} retention=${s.retention} schedule=${s.schedule} />
      <${ReviewStat} ctx=${ctx} />
    </div>
    <div class="cols">
      <section class="card" aria-labelledby="ov-why">
        <header class="card-head">
          <h2 id="ov-why">Owed jobs by why</h2>
          <a class="card-link" href="/admin/jobs" onClick=${(e) => {
            e.preventDefault();
            ctx.navigate('jobs', '');
          }}>All jobs →</a>
        </header>
        <${WhyBars} byWhy=${jobs.byWhy || {}} heldByWhy=${jobs.heldByWhy || {}} ctx=${ctx} />
      </section>
      <${BackfillSummary} b=${s.backfill} ctx=${ctx} />
    </div>
    <${HoldsCard} ctx=${ctx} holds=${s.holds} onChange=${live.refresh} />
    <section class="card" aria-labelledby="ov-settled">
      <header class="card-head">
        <h2 id="ov-settled">Jobs settled per minute</h2>
        <span class="muted small">last hour</span>
      </header>
      <${SettledChart} data=${s.settled || []} />
    </section>
  </div>`;
}

/** The periodic work (robfig/cron): the sweep's period and next run; every entry in the title. */
function Schedule({ schedule }) {
  if (!Array.isArray(schedule) || schedule.length === 0) return null;
  const sweep = schedule.find((e) => e.name === 'content sweep') || schedule[0];
  const all = schedule
    .map((e) => `${e.name}: every ${fmt.duration(e.everyMs)}${e.nextRunAt ? ', next ' + fmt.time(e.nextRunAt) : ''}`)
    .join('\n');
  return html`<div class="muted small" data-testid="schedule" title=${all}>
    cron: ${sweep.name} every ${fmt.duration(sweep.everyMs)}${sweep.nextRunAt
      ? html`, next <${Rel} at=${sweep.nextRunAt} />`
      : ' · not running in this process'}
  </div>`;
}

function Health({ health, version, retention, schedule }) {
  const entries = Object.entries(health || {});
  const bad = entries.filter(([, v]) => v !== 'ok');
  return html`<div class=${'stat' + (bad.length ? ' stat-err' : ' stat-ok')} data-testid="stat-health">
    <div class="stat-label">Health</div>
    <div class="stat-value">${entries.length === 0 ? '—' : bad.length ? 'degraded' : 'ok'}</div>
    <div class="stat-sub">
      ${entries.map(([k, v]) => html`<${Badge} kind=${v === 'ok' ? 'ok' : 'err'} title=${`${k}: ${v}`}>${k}${v === 'ok' ? '' : ': ' + v}<//> `)}
      ${version ? html`<span class="muted">v${String(version).replace(/^v/, '')}</span>` : null}
      ${retention
        ? html`<div class="muted small" data-testid="retention">keeps events ${retention.events}, deliveries ${retention.deliveries}</div>`
        : null}
      <${Schedule} schedule=${schedule} />
    </div>
  </div>`;
}

const BREAKER = {
  closed: { kind: 'ok', text: 'the model is asked' },
  open: { kind: 'err', text: 'the model is not asked: due jobs wait, uncharged, for the next probe' },
  probing: { kind: 'warn', text: 'one call is testing the model' },
};

/** What happens next, in words: when the next probe comes, or that none will while screens are held. */
function nextInWords(m, left) {
  if (m.state === 'closed') return 'the model is asked as usual';
  if (m.screensHeld) return 'no probes while screens are held — test the model';
  if (m.state === 'probing') return 'one call is testing the model now';
  if (left !== null && left > 0) return `next probe in ${fmt.countdown(left)}`;
  return 'the next job probes the model';
}

/** What a test call found and what runs because of it: nothing held runs, whatever the model says. */
function probeInWords(p, screensHeld) {
  if (!p.answered) return `The model did not answer: ${p.error || p.why || 'failed'}.`;
  const held = ' Screens stay held: none runs until the hold is lifted.';
  if (!p.closed) return 'The model answered.' + (screensHeld ? held : '');
  return screensHeld
    ? 'The model answered: the breaker is closed.' + held
    : 'The model answered: the breaker is closed and the jobs that waited for it run now.';
}

/** The model's breaker (closed, open, probing) in words, its last error, and a test call. */
function ModelStat({ ctx }) {
  const live = useLive(ctx, () => ctx.api('/api/admin/model'), 5000);
  const now = useNow(1000);
  const [busy, setBusy] = useState(false);
  const btn = useRef(null);
  useEffect(() => {
    const on = () => live.refresh(); // a hold changes what happens next
    addEventListener('owed:holds', on);
    return () => removeEventListener('owed:holds', on);
  }, []);
  const m = live.data;
  if (!m) return html`<${Stat} label="Model" value="—" testid="stat-model" />`;
  const b = BREAKER[m.state] || { kind: 'warn', text: m.state };
  const left = m.nextProbeAt ? fmt.until(m.nextProbeAt, now) : null;
  const probe = async () => {
    setBusy(true);
    try {
      const r = await ctx.api('/api/admin/model/probe', { method: 'POST' });
      live.setData(r);
      const p = r.probe || {};
      ctx.notify(probeInWords(p, r.screensHeld), p.answered ? 'ok' : 'error');
    } catch (e) {
      ctx.notify('Could not test the model: ' + e.message, 'error');
    }
    setBusy(false);
    requestAnimationFrame(() => btn.current && btn.current.focus());
  };
  return html`<div class=${'stat stat-model stat-' + b.kind} data-testid="stat-model">
    <div class="stat-label">Model</div>
    <div class="stat-value" data-testid="model-state">${m.state}</div>
    <div class="stat-sub">
      <div data-testid="model-next">${b.text}: <strong>${nextInWords(m, left)}</strong></div>
      ${m.state !== 'closed' ? html`<div class="small">${fmt.number(m.failures)} failures</div>` : null}
      ${m.lastError && m.state !== 'closed' ? html`<div class="small err-text" data-testid="model-last-error">last error: ${m.lastError}</div>` : null}
      <span class="num small" data-testid="model-inflight" title="Model calls this server is waiting on now (a score asks three), out of OWED_MODEL_CONCURRENCY">${fmt.number(m.inFlight)} of ${fmt.number(m.cap)} model calls in flight here</span>
      <div><button type="button" class="btn btn-small" ref=${btn} disabled=${busy} onClick=${probe} data-testid="model-probe"
        title="One test call now, charged to nobody (at most one every 5 s)">${busy ? 'Testing…' : 'Test the model'}</button></div>
    </div>
  </div>`;
}

const HOLDABLE = [
  ['screen', 'Screens', 'no screen job is claimed, charged or asked'],
  ['score', 'Scores', 'no score job is claimed, charged or asked'],
  ['deliveries', 'Webhook deliveries', 'no delivery is sent'],
];

/** Hold or lift work, e.g. during a model outage: held work is claimed by no replica. */
function HoldsCard({ ctx, holds, onChange }) {
  const [cur, setCur] = useState(holds || {});
  const [busy, setBusy] = useState(null);
  useEffect(() => {
    if (!busy) setCur(holds || {});
  }, [JSON.stringify(holds)]);
  useEffect(() => {
    const on = (e) => setCur(e.detail || {});
    addEventListener('owed:holds', on);
    return () => removeEventListener('owed:holds', on);
  }, []);
  const toggle = async (k, v) => {
    const el = document.activeElement;
    setBusy(k);
    try {
      const h = await ctx.api('/api/admin/holds', { method: 'PUT', body: { [k]: v } });
      setCur(h);
      dispatchEvent(new CustomEvent('owed:holds', { detail: h }));
      ctx.notify(v ? `${HOLDABLE.find((x) => x[0] === k)[1]} are on hold.` : 'The hold is lifted.', 'ok');
      onChange && onChange();
    } catch (e) {
      ctx.notify('Could not change the hold: ' + e.message, 'error');
    }
    setBusy(null);
    // The box was disabled while busy (which drops focus): give it back.
    requestAnimationFrame(() => el && el.isConnected && el.focus());
  };
  return html`<section class="card" aria-labelledby="ov-holds" data-testid="overview-holds">
    <header class="card-head"><h2 id="ov-holds">Holds</h2><span class="muted small">pause work during an outage; nothing held is charged</span></header>
    <div class="holds-form">
      ${HOLDABLE.map(([k, label, what]) => html`<label title=${what}>
        <input type="checkbox" checked=${!!cur[k]} disabled=${busy !== null} onChange=${(e) => toggle(k, e.currentTarget.checked)} data-testid=${'hold-' + k} />
        <span>Hold ${label.toLowerCase()}</span></label>`)}
    </div>
  </section>`;
}

/** The held jobs' split: what they would show once the hold is lifted (upstream, breaker, …). */
function HeldSplit({ heldByWhy }) {
  const parts = WHYS.filter((w) => w !== 'held' && heldByWhy[w] > 0);
  if (!parts.length) return null;
  return html`<li class="bars-sub small muted" data-testid="overview-held-split">of the held, once lifted: ${parts.map((w, i) => html`${i ? ' · ' : ''}<span class="nowrap">${whyInfo(w === 'none' ? null : w).label} <strong class="num">${fmt.number(heldByWhy[w])}</strong></span>`)}</li>`;
}

function WhyBars({ byWhy, heldByWhy, ctx }) {
  const max = Math.max(1, ...WHYS.map((w) => byWhy[w] || 0));
  return html`<ul class="bars" data-testid="overview-why">
    ${WHYS.map((w) => {
      const n = byWhy[w] || 0;
      const info = whyInfo(w === 'none' ? null : w);
      // The whole row (label, bar and count) links to those jobs in Content jobs; its name is
      // its visible text (the bar repeats the count).
      return html`<li><a class="bars-row bars-link" href=${'/admin/jobs?why=' + w} title=${info.text} data-testid=${'overview-why-' + w} onClick=${(e) => {
          if (e.metaKey || e.ctrlKey || e.shiftKey || e.button === 1) return;
          e.preventDefault();
          ctx.navigate('jobs', '?why=' + w);
        }}>
        <span class="bars-label">${info.label}</span>
        <span aria-hidden="true"><${HBar} value=${n} max=${max} cls=${'hbar-' + info.kind} label=${`${info.label}: ${n}`} /></span>
        <span class="bars-n num">${fmt.number(n)}</span><span class="sr-only">${n === 1 ? ' job' : ' jobs'}</span>
      </a></li>${w === 'held' && n > 0 ? html`<${HeldSplit} heldByWhy=${heldByWhy} />` : null}`;
    })}
  </ul>`;
}

function BackfillSummary({ b, ctx }) {
  const now = useNow(1000);
  if (!b) return html`<section class="card"><h2>Backfill</h2><p class="muted">No data.</p></section>`;
  const left = b.limitedUntil ? fmt.until(b.limitedUntil, now) : null;
  const limited = left !== null && left > 0;
  const walkLeft = b.walkingUntil ? fmt.until(b.walkingUntil, now) : null;
  const walking = walkLeft !== null && walkLeft > 0;
  return html`<section class="card" aria-labelledby="ov-backfill" data-testid="overview-backfill">
    <header class="card-head">
      <h2 id="ov-backfill">Backfill</h2>
      <a class="card-link" href="/admin/backfill" onClick=${(e) => {
        e.preventDefault();
        ctx.navigate('backfill', '');
      }}>Open →</a>
    </header>
    <dl class="kv">
      <dt>Pending</dt><dd class="num">${fmt.number(b.pending)}</dd>
      <dt>Rate</dt><dd class="num">${fmt.rate(b.perMinute)}</dd>
      <dt>ETA</dt><dd class="num">${fmt.eta(b.etaMs)}</dd>
      <dt>Running</dt><dd>${b.running ? html`<code>${b.running}</code>` : html`<span class="muted">nothing</span>`}</dd>
      <dt>Waits for</dt>
      <dd data-testid="overview-waits">${limited
        ? 'the rate limit'
        : walking
          ? html`the walk of <code>${b.walkingChat || 'a chat'}</code> (the lock lapses ${fmt.relative(b.walkingUntil, now)} unless it pushes)`
          : b.running
            ? html`<span class="muted">nothing: it runs</span>`
            : html`<span class="muted">nothing</span>`}</dd>
      <dt>Rate limit</dt>
      <dd>${limited
        ? html`<span class="countdown" role="timer" aria-live="off" data-testid="overview-limited">
            <${Badge} kind="warn">limited<//> lifts in <strong class="num">${fmt.countdown(left)}</strong></span>`
        : html`<span class="muted">none</span>`}</dd>
    </dl>
    <p class="sr-only" aria-live="polite">${limited ? `Backfill rate limited until ${fmt.time(b.limitedUntil)}` : ''}</p>
  </section>`;
}

const SERIES = [
  ['screen', 'screens settled', 's-screen'],
  ['score', 'scores settled', 's-score'],
  ['pending', 'attempts rescheduled', 's-pending'],
];

/**
 * Jobs settled per minute as small multiples: screens, scores and rescheduled attempts each on
 * its own scale, so a storm of reschedules never flattens the work that got done.
 */
function SettledChart({ data }) {
  const n = data.length;
  if (!n) return html`<p class="muted">No data yet.</p>`;
  const total = (k) => data.reduce((a, d) => a + (d[k] || 0), 0);
  return html`<figure class="chart chart-multiples" data-testid="overview-settled">
    ${SERIES.map(([k, label, cls]) => html`<${Series} data=${data} k=${k} label=${label} cls=${cls} />`)}
    <div class="chart-x" aria-hidden="true">
      <span>${fmt.clock(data[0].at)}</span><span>${fmt.clock(data[Math.floor(n / 2)].at)}</span><span>${fmt.clock(data[n - 1].at)}</span>
    </div>
    <figcaption class="legend">
      <span><i class="swatch s-screen"></i>screen <strong class="num">${fmt.number(total('screen'))}</strong></span>
      <span><i class="swatch s-score"></i>score <strong class="num">${fmt.number(total('score'))}</strong></span>
      <span><i class="swatch s-pending"></i>pending (rescheduled) <strong class="num">${fmt.number(total('pending'))}</strong></span>
      <span class="muted small">each row has its own scale</span>
    </figcaption>
  </figure>`;
}

/** One series: a bar per minute, scaled to its own peak. */
function Series({ data, k, label, cls }) {
  const W = 10;
  const H = 40;
  const n = data.length;
  const vals = data.map((d) => d[k] || 0);
  const peak = Math.max(...vals);
  const top = niceMax(Math.max(1, peak));
  const y = (v) => H - (v / top) * H;
  const sum = vals.reduce((a, v) => a + v, 0);
  return html`<div class="series" data-testid=${'overview-series-' + k}>
    <div class="series-label"><span>${label}</span><span class="muted small num">peak ${fmt.number(peak)}/min</span></div>
    <div class="chart-body">
      <div class="chart-y" aria-hidden="true"><span>${top}</span><span>0</span></div>
      <svg class="chart-svg chart-svg-small" viewBox=${`0 0 ${n * W} ${H}`} preserveAspectRatio="none" role="img"
        aria-label=${`${label}: ${sum} in the last hour, at most ${peak} a minute`}>
        <line class="grid" x1="0" x2=${n * W} y1=${H / 2} y2=${H / 2} vector-effect="non-scaling-stroke" />
        ${data.map((d, i) => {
          const v = vals[i];
          return html`<g class="chart-col">
            <title>${fmt.clock(d.at)} — ${label}: ${v}</title>
            <rect class="hit" x=${i * W} y="0" width=${W} height=${H} />
            ${v ? html`<rect class=${cls} x=${i * W + 1} width=${W - 2} y=${y(v)} height=${H - y(v)} />` : null}
          </g>`;
        })}
        <line class="axis" x1="0" x2=${n * W} y1=${H} y2=${H} vector-effect="non-scaling-stroke" />
      </svg>
    </div>
  </div>`;
}

function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return Math.max(2, m * p);
  return v;
}

/** The review queue: unsure and appealed entries waiting, time to decision, overturns (7 days). */
function ReviewStat({ ctx }) {
  const live = useLive(ctx, () => ctx.api('/api/admin/review/measures'), 10000);
  const m = live.data;
  if (!m) return html`<${Stat} label="Review queue" value="—" testid="stat-review" />`;
  const waiting = (m.open.unsure || 0) + (m.open.appeal || 0);
  const secs = (v) => (v == null ? '—' : fmt.duration(v * 1000));
  return html`<div class=${'stat' + (waiting ? ' stat-warn' : '')} data-testid="stat-review">
    <div class="stat-label">Review queue</div>
    <div class="stat-value"><a href="/admin/review" onClick=${(e) => {
      e.preventDefault();
      ctx.navigate('review', '');
    }} data-testid="stat-review-open">${fmt.number(m.open.unsure)} unsure · ${fmt.number(m.open.appeal)} appealed</a></div>
    <div class="stat-sub" data-testid="stat-review-measures">
      <span title="time from entering review to the decision, last 7 days">decided in p50 ${secs(m.p50Seconds.unsure)} / p90 ${secs(m.p90Seconds.unsure)} (unsure), p50 ${secs(m.p50Seconds.appeal)} / p90 ${secs(m.p90Seconds.appeal)} (appeals)</span>
      <span>${m.suggested ? `${Math.round(m.overturnedShare * 100)}% of ${fmt.number(m.suggested)} model suggestions overturned` : 'no model suggestion decided yet'}</span>
    </div>
  </div>`;
}

export default {
  id: 'overview',
  title: 'Overview',
  mount(el, ctx) {
    render(html`<${Overview} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
