// Backfill (the bot tab): one job per chat with its member scrapes, progress, throughput and
// ETAs, in run order (the running job, then the queue, then paused, idle and done jobs), each
// saying what its ETA waits for; start and pause all jobs or one chat; a live countdown while a
// rate limit holds; releasing the walk lock (confirmed); and the queue settings. Data: GET /api/backfill
// every 3 s; POST /api/backfill/{start,pause}; POST /api/admin/backfill/walk/release;
// PUT /api/backfill/settings.

import { html, render, useState, useEffect } from '../vendor/preact-htm.js';
import { fmt } from '../lib/fmt.js';
import { useLive, useNow, Rel, Badge, LoadError, Loading, Empty, Stat, TableWrap, Confirm } from '../lib/ui.js';

const KINDS = ['image', 'gif', 'video', 'audio'];
const STATE_KIND = { idle: 'neutral', queued: 'info', running: 'run', paused: 'warn', done: 'ok' };
const STATE_TITLE = {
  idle: 'not started',
  queued: 'started; waits while another job holds the queue',
  running: 'previewing batch by batch',
  paused: 'paused; start it again to resume',
  done: 'no pending rows left',
};

/** Whether a job is next to run but its first batch waits (for the rate limit or a walk). */
const heldAtHead = (j) => j.state === 'queued' && j.position === 0;

function stateTitle(j) {
  return heldAtHead(j) ? 'started; next to run once the wait in hand ends' : STATE_TITLE[j.state];
}

/**
 * Rows settled for good: everything neither pending nor waiting for its one suspect retry
 * (cached, failed, skipped and unverified alike). The API counts suspect rows per member only,
 * so callers pass the members' sum for a job, a backend or the totals.
 */
function progressOf(x, suspect = x.suspect || 0) {
  const total = x.total || 0;
  return { done: Math.max(0, total - (x.pending || 0) - suspect), total };
}

function sumKinds(members) {
  const out = Object.fromEntries(KINDS.map((k) => [k, 0]));
  for (const m of members || []) {
    for (const [k, v] of Object.entries(m.pendingByKind || {})) out[k] = (out[k] || 0) + (v || 0);
  }
  return out;
}

function sum(members, k) {
  return (members || []).reduce((a, m) => a + (m[k] || 0), 0);
}

/** Whether a job's rate is measured (from its run) or the settings-based estimate. */
function measured(job, status) {
  if (typeof job.rateMeasured === 'boolean') return job.rateMeasured;
  if (typeof job.measured === 'boolean') return job.measured;
  return !!job.startedAt && job.state !== 'idle' && job.perMinute !== status.estimatedPerMinute;
}

const active = (j) => j.state === 'running' || j.state === 'queued';

/** An ETA as the estimate it is: "about 1m 45s"; "now", "—" and the like as they are. */
const estimate = (ms) => {
  const v = fmt.eta(ms);
  return /\d/.test(v) ? 'about ' + v : v;
};

const RANK = { running: 0, queued: 1, paused: 2, idle: 3, done: 4 };

/**
 * Jobs in run order: the running one, the queue by position, then paused, idle and done jobs
 * (most pending first among those). The API lists them by pending rows.
 */
export function runOrder(jobs) {
  const rank = (j) => RANK[j.state] ?? 5;
  return [...(jobs || [])].sort(
    (a, b) => rank(a) - rank(b) || (a.position ?? 0) - (b.position ?? 0) || (b.pending || 0) - (a.pending || 0)
  );
}

/** What a job's ETA waits for, in words, given the jobs in run order and the live waits. */
function waitText(j, ordered, status, waits) {
  const walkChat = status.walkingChat ? html`the walk in chat <code>${status.walkingChat}</code>` : 'a walk';
  const held =
    waits.limited ? html`the rate limit (${fmt.countdown(waits.limitedLeft)})` :
    waits.walking ? html`${walkChat} (lapses ${fmt.relative(status.walkingUntil, waits.now)} unless it pushes again)` : null;
  if (j.state === 'running' || heldAtHead(j)) {
    if (j.waitsFor === 'rate-limit' || (j.waitsFor == null && waits.limited)) return held || 'the rate limit';
    if (j.waitsFor === 'walk' || (j.waitsFor == null && waits.walking)) return held || walkChat;
    return 'nothing: running now';
  }
  switch (j.state) {
    case 'queued': {
      const i = ordered.findIndex((x) => x.chatId === j.chatId);
      const ahead = i > 0 ? ordered[i - 1] : null;
      const turn = ahead ? html`its turn in the queue, after chat <code>${ahead.chatId}</code>` : 'its turn in the queue';
      return held ? html`${turn}, and ${held}` : turn;
    }
    case 'paused':
      return 'a start: paused jobs are not scheduled';
    case 'idle':
      return 'a start: not scheduled';
    default:
      return '—';
  }
}

function Backfill({ ctx }) {
  const live = useLive(ctx, () => ctx.api('/api/backfill'), 3000);
  const now = useNow(1000);
  const [busy, setBusy] = useState(null);
  const s = live.data;

  const act = async (what, chatId) => {
    setBusy(what + ':' + (chatId || '*'));
    try {
      const st = await ctx.api('/api/backfill/' + what, { method: 'POST', body: chatId ? { chatId } : {} });
      if (st && Array.isArray(st.jobs)) live.setData(st);
      else live.refresh();
      const target = chatId ? `chat ${chatId}` : 'all jobs';
      ctx.notify(what === 'start' ? `Started ${target}.` : `Pausing ${target} after the current batch.`, 'ok');
    } catch (e) {
      ctx.notify(`Could not ${what} ${chatId ? 'chat ' + chatId : 'the queue'}: ${e.message}`, 'error');
    } finally {
      setBusy(null);
      // The busy buttons were disabled, dropping the focus: Start all or Pause all takes it
      // back, whichever is still of use (a chat's own buttons keep theirs through its row).
      if (!chatId) {
        requestAnimationFrame(() => {
          const mine = document.querySelector(`[data-testid="backfill-${what}-all"]`);
          const other = document.querySelector(`[data-testid="backfill-${what === 'start' ? 'pause' : 'start'}-all"]`);
          (mine && !mine.disabled ? mine : other && !other.disabled ? other : mine)?.focus();
        });
      }
    }
  };

  if (!s) {
    return html`<div class="stack">
      <${LoadError} error=${live.error} retry=${live.refresh} />
      ${live.error ? null : html`<${Loading} />`}
    </div>`;
  }

  const jobs = runOrder(s.jobs);
  const t = s.totals || {};
  const left = s.limitedUntil ? fmt.until(s.limitedUntil, now) : null;
  const limited = left !== null && left > 0;
  const anyActive = jobs.some(active);
  const anyStartable = jobs.some((j) => !active(j) && (j.pending || 0) > 0);
  const totalMeasured = jobs.some((j) => j.state === 'running' && measured(j, s));
  const totalWaited = (jobs.find((j) => j.state === 'running' && measured(j, s)) || {}).waitedMs || 0;
  const allMembers = jobs.flatMap((j) => j.members || []);
  const tp = progressOf(t, sum(allMembers, 'suspect'));
  const walkLeft = s.walkingUntil ? fmt.until(s.walkingUntil, now) : null;
  const walking = walkLeft !== null && walkLeft > 0;

  return html`<div class="stack">
    <${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} />
    ${limited
      ? html`<div class="note note-warn limited" data-testid="backfill-limited">
          <strong>Rate limited.</strong>
          <span>The chat platform asked us to wait: the queue resumes in${' '}<strong class="num countdown" role="timer" aria-live="off" data-testid="backfill-countdown">${fmt.countdown(left)}</strong>
            <span class="muted"> (at ${fmt.time(s.limitedUntil)})</span>.</span>
        </div>`
      : null}
    ${walking
      ? html`<div class="note note-info" data-testid="backfill-walking">
          <strong>${s.walkingChat ? html`A walk of <code data-testid="backfill-walking-chat">${s.walkingChat}</code> is running.` : 'A walk is running.'}</strong>
          <span>The bot is reading ${s.walkingChat ? 'that' : "a chat's"} history and holds the media-traffic lock: the queue waits until it stops pushing
            (the lock lapses ${fmt.relative(s.walkingUntil, now)} unless the walk pushes again).</span>
          <${ReleaseWalk} ctx=${ctx} chat=${s.walkingChat} onDone=${live.setData} />
        </div>`
      : null}
    <p class="sr-only" aria-live="polite">${limited ? `Backfill rate limited until ${fmt.time(s.limitedUntil)}.` : ''}</p>

    <div class="bf-layout">
      <div class="stack">
        <section class="card" aria-labelledby="bf-h">
          <header class="card-head">
            <h2 id="bf-h">Backfill queue</h2>
            <div class="row">
              <button type="button" class="btn btn-primary" onClick=${() => act('start')} disabled=${!!busy || !anyStartable}
                data-testid="backfill-start-all" title="Start every job with pending rows, smallest first">${busy === 'start:*' ? 'Starting…' : 'Start all'}</button>
              <button type="button" class="btn" onClick=${() => act('pause')} disabled=${!!busy || !anyActive}
                data-testid="backfill-pause-all" title="Pause every job after its current batch">${busy === 'pause:*' ? 'Pausing…' : 'Pause all'}</button>
            </div>
          </header>
          <div class="stats stats-tight" data-testid="backfill-totals">
            <${Stat} label="Pending" value=${fmt.number(t.pending)} testid="backfill-total-pending" />
            <${Stat} label="Cached" value=${fmt.number(t.cached)} />
            <${Stat} label="Failed" value=${fmt.number(t.failed)} kind=${t.failed ? 'warn' : null} />
            <${Stat} label="Total" value=${fmt.number(t.total)} sub=${fmt.percent(tp.done, tp.total) + ' settled'} />
            <${Stat} label="Rate" value=${fmt.rate(t.perMinute)} sub=${html`<${RateLabel} measured=${totalMeasured} waitedMs=${totalWaited} />`} testid="backfill-rate" />
            <${Stat} label="ETA" value=${fmt.eta(t.etaTotalMs ?? t.etaMs)} testid="backfill-eta"
              sub=${!t.pending ? 'nothing to do'
                : t.etaTotalMs != null ? (limited ? 'until the started jobs are done, after the rate limit' : walking ? 'until the started jobs are done, after the walk' : 'until the started jobs are done')
                : 'to clear everything, once started'} />
            <${Stat} label="Stored" value=${fmt.bytes(t.bytes)} sub=${fmt.number(t.downloaded) + ' downloaded'} />
          </div>
          <${Kinds} counts=${sumKinds(allMembers)} label="Pending by kind, all jobs" />
        </section>

        ${jobs.length === 0
          ? html`<section class="card"><${Empty}>No chat has rows left to preview. Finished or paused scrapes show up here when they have pending media.<//></section>`
          : html`<div class="stack" data-testid="backfill-jobs">${jobs.map((j) => html`<${Job} key=${j.chatId} job=${j} status=${s} busy=${busy} act=${act} now=${now}
              limitedLeft=${limited ? left : null} walking=${walking} ordered=${jobs} />`)}</div>`}
      </div>

      <div class="stack">
        <${Settings} ctx=${ctx} status=${s} onSaved=${live.setData} />
        <${Backends} byBackend=${t.byBackend || {}} members=${allMembers} />
      </div>
    </div>
  </div>`;
}

/** Release the walk lock (the bot's walk may have died), once confirmed; Esc cancels. */
function ReleaseWalk({ ctx, chat, onDone }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const cancel = () => {
    setAsking(false);
    requestAnimationFrame(() => document.querySelector('[data-testid="backfill-walk-release"]')?.focus());
  };
  const release = async () => {
    setBusy(true);
    try {
      const st = await ctx.api('/api/admin/backfill/walk/release', { method: 'POST' });
      if (st && Array.isArray(st.jobs)) onDone(st);
      ctx.notify('Walk lock released: the queue goes on now.', 'ok');
    } catch (e) {
      ctx.notify('Could not release the walk lock: ' + e.message, 'error');
    }
    setBusy(false);
    setAsking(false);
  };
  if (!asking) {
    return html`<button type="button" class="btn btn-small" onClick=${() => setAsking(true)} data-testid="backfill-walk-release">Release the walk lock…</button>`;
  }
  const q = `Release the walk lock${chat ? ' of chat ' + chat : ''}? The queue goes on now; if the walk is still alive, its next push takes the lock again.`;
  return html`<${Confirm} text=${q} confirmLabel=${busy ? 'Releasing…' : 'Yes, release it'} danger busy=${busy}
    onConfirm=${release} onCancel=${cancel} testid="backfill-walk-confirm" />`;
}

function RateLabel({ measured: m, waitedMs }) {
  if (!m) {
    return html`<span class="rate-label" title="not this run's own yet (measured once it has run 30 s): the queue's latest measured rate, or what the current settings allow">estimated</span>`;
  }
  return waitedMs > 0
    ? html`<span class="rate-label rate-measured" title=${'measured from the running job, counting ' + fmt.duration(waitedMs) + ' of rate-limit waits (Retry-After): rows over the time spent fetching and waiting'}>measured, waits included</span>`
    : html`<span class="rate-label rate-measured" title="measured from the running job over its running time; rate-limit waits count from the second one on (one 429 is shown as the wait in hand)">measured</span>`;
}

/** When a job's run started, or why it has not: the API sets startedAt at its first batch. */
function startedText(j, now) {
  if (j.startedAt) return html`<${Rel} at=${j.startedAt} now=${now} />`;
  if (heldAtHead(j)) return html`<span class="muted" title="its first batch waits for the rate limit or the walk">waiting to run</span>`;
  if (j.state === 'queued') return html`<span class="muted" title="started, but it has not run yet: it waits for its turn">queued</span>`;
  if (j.state === 'running') return html`<span class="muted" title="its first batch is under way">starting</span>`;
  return html`<span class="muted" title="this run never ran a batch">—</span>`;
}

function Kinds({ counts, label }) {
  return html`<ul class="chips" aria-label=${label}>
    ${KINDS.map((k) => html`<li class=${'chip' + (counts[k] ? '' : ' chip-zero')}><span class="chip-k">${k}</span> <span class="num">${fmt.number(counts[k] || 0)}</span></li>`)}
  </ul>`;
}

function Job({ job: j, status, busy, act, now, limitedLeft, walking, ordered }) {
  const id = j.chatId;
  const members = j.members || [];
  const p = progressOf(j, sum(members, 'suspect'));
  const isActive = active(j);
  const canStart = !isActive && (j.pending || 0) > 0;
  const pct = fmt.percent(p.done, p.total);
  const m = measured(j, status);
  return html`<article class=${'card bf-job bf-' + j.state} data-testid=${'backfill-job-' + id} aria-labelledby=${'bf-job-' + id}>
    <header class="card-head">
      <div class="bf-title">
        <h3 id=${'bf-job-' + id}>Chat <code>${id}</code></h3>
        ${j.guildId ? html`<span class="muted small">guild <code>${j.guildId}</code></span>` : null}
        <${Badge} kind=${STATE_KIND[j.state] || 'neutral'} testid=${'backfill-state-' + id} title=${stateTitle(j)}>${j.state}<//>
        ${j.state === 'queued' && j.position != null
          ? html`<span class="muted small" data-testid=${'backfill-position-' + id} title="place in the run order; the running job is 0">${
              j.position === 0 ? 'next to run' : '#' + j.position + ' in the queue'}</span>`
          : null}
      </div>
      <div class="row">
        <button type="button" class="btn btn-small" disabled=${!!busy || !canStart} onClick=${() => act('start', id)}
          data-testid=${'backfill-start-' + id} aria-label=${(j.state === 'paused' ? 'Resume' : 'Start') + ' chat ' + id}>${busy === 'start:' + id ? 'Starting…' : j.state === 'paused' ? 'Resume' : 'Start'}</button>
        <button type="button" class="btn btn-small" disabled=${!!busy || !isActive} onClick=${() => act('pause', id)}
          data-testid=${'backfill-pause-' + id} aria-label=${'Pause chat ' + id}>${busy === 'pause:' + id ? 'Pausing…' : 'Pause'}</button>
      </div>
    </header>
    ${(j.state === 'running' || heldAtHead(j)) && (limitedLeft !== null || walking)
      ? html`<p class="bf-wait" data-testid=${'backfill-waiting-' + id}>
          ${limitedLeft !== null
            ? html`Waiting out the rate limit: the ${j.startedAt ? 'next' : 'first'} batch in <strong class="num">${fmt.countdown(limitedLeft)}</strong>. The ETAs below count from then.`
            : html`Waiting while ${status.walkingChat ? html`the walk in chat <code>${status.walkingChat}</code>` : 'a walk'} holds the media-traffic lock. The ETAs below count from when it lapses.`}
        </p>`
      : null}
    <div class="progress-line">
      <progress max=${Math.max(1, p.total)} value=${p.done} aria-label=${`chat ${id}: ${p.done} of ${p.total} rows settled`} data-testid=${'backfill-progress-' + id}></progress>
      <span class="num small"><strong>${pct}</strong> · ${fmt.number(p.done)} / ${fmt.number(p.total)}</span>
    </div>
    <dl class="figs">
      <div><dt>Pending</dt><dd class="num">${fmt.number(j.pending)}</dd></div>
      <div><dt>Cached</dt><dd class="num">${fmt.number(j.cached)}</dd></div>
      <div><dt>Failed</dt><dd class="num">${fmt.number(j.failed)}</dd></div>
      <div><dt>Processed</dt><dd class="num" title="rows this run settled (cached, skipped, failed or unverified), each once" data-testid=${'backfill-processed-' + id}>${fmt.number(j.processed)}</dd></div>
      <div><dt>Rate</dt><dd class="num" data-testid=${'backfill-rate-' + id}>${fmt.rate(j.perMinute)} <${RateLabel} measured=${m} waitedMs=${j.waitedMs || 0} />${
        m && j.waitedMs > 0 ? html`<span class="muted small"> · ${fmt.duration(j.waitedMs)} of rate-limit waits counted</span>` : null}</dd></div>
      <div><dt>Starts</dt><dd class="num" title="time until this job starts, after the jobs ahead of it and the wait in hand" data-testid=${'backfill-starts-' + id}>${
        j.state === 'running' ? (j.waitsFor ? 'running; the next batch waits' : 'running now') : j.etaStartMs == null ? html`<span class="muted">not scheduled</span>` : estimate(j.etaStartMs)}</dd></div>
      <div><dt>Runs for</dt><dd class="num" title="an estimate from the rate: how long the job will run once it runs, not how long it has run" data-testid=${'backfill-runs-for-' + id}>${
        (j.pending || 0) > 0 ? estimate(j.etaRunMs ?? j.etaMs) : '—'}</dd></div>
      <div><dt>Done in</dt><dd class="num" title="an estimate from the rate and the waits ahead" data-testid=${'backfill-done-in-' + id}>${estimate(j.etaTotalMs)}</dd></div>
      <div class="fig-wide"><dt>Waits for</dt><dd data-testid=${'backfill-waits-' + id}>${waitText(j, ordered || [], status,
        { limited: limitedLeft !== null, limitedLeft, walking, now })}</dd></div>
      <div><dt>Started</dt><dd data-testid=${'backfill-started-' + id}>${startedText(j, now)}</dd></div>
      ${j.finishedAt ? html`<div><dt>Finished</dt><dd><${Rel} at=${j.finishedAt} now=${now} /></dd></div>` : null}
      <div><dt>Stored</dt><dd class="num">${fmt.bytes(j.bytes)}</dd></div>
    </dl>
    <${Kinds} counts=${sumKinds(members)} label=${'Pending by kind, chat ' + id} />
    <details class="members" open=${members.length <= 3}>
      <summary>${members.length} ${members.length === 1 ? 'member scrape' : 'member scrapes'}</summary>
      <${TableWrap} label=${'Member scrapes of chat ' + id}>
        <table class="table table-compact" data-testid=${'backfill-members-' + id}>
          <thead><tr>
            <th scope="col">Scrape</th><th scope="col">Backend · mode</th><th scope="col">State</th><th scope="col">Progress</th>
            <th scope="col" class="num">Pending</th><th scope="col" class="num">Cached</th><th scope="col" class="num">Failed</th>
            <th scope="col" class="num" title="failures kept for one delayed retry">Suspect</th><th scope="col" class="num" title="suspect rows whose retry failed too">Unverified</th>
            <th scope="col" class="num">Total</th><th scope="col" class="num">Stored</th>
          </tr></thead>
          <tbody>${members.map((mb) => {
            const mp = progressOf(mb);
            return html`<tr key=${mb.scrapeId} data-testid=${'backfill-member-' + mb.scrapeId}>
              <td><code>${mb.scrapeId}</code></td>
              <td>${mb.backend} <span class="muted">· ${mb.mode}</span></td>
              <td><${Badge} kind=${mb.state === 'failed' ? 'err' : mb.state === 'done' ? 'ok' : 'neutral'}>${mb.state}<//></td>
              <td class="cell-progress"><progress class="progress-sm" max=${Math.max(1, mp.total)} value=${mp.done} aria-label=${`scrape ${mb.scrapeId}: ${fmt.percent(mp.done, mp.total)}`}></progress>
                <span class="num small">${fmt.percent(mp.done, mp.total)}</span></td>
              <td class="num">${fmt.number(mb.pending)}</td>
              <td class="num">${fmt.number(mb.cached)}</td>
              <td class="num">${fmt.number(mb.failed)}</td>
              <td class="num">${fmt.number(mb.suspect)}</td>
              <td class="num">${fmt.number(mb.unverified)}</td>
              <td class="num">${fmt.number(mb.total)}</td>
              <td class="num">${fmt.bytes(mb.bytes)}</td>
            </tr>`;
          })}</tbody>
        </table>
      <//>
    </details>
  </article>`;
}

function Backends({ byBackend, members }) {
  const entries = Object.entries(byBackend);
  return html`<section class="card" aria-labelledby="bf-backends">
    <header class="card-head"><h2 id="bf-backends">By backend</h2></header>
    ${entries.length === 0
      ? html`<p class="muted">No scrapes.</p>`
      : html`<ul class="backends">${entries.map(([name, b]) => {
          const p = progressOf(b, sum(members.filter((m) => m.backend === name), 'suspect'));
          return html`<li>
            <div class="backend-head"><strong>${name}</strong><span class="num small">${fmt.number(b.pending)} pending · ${fmt.percent(p.done, p.total)}</span></div>
            <progress max=${Math.max(1, p.total)} value=${p.done} aria-label=${name + ' settled'}></progress>
            <div class="muted small num">${fmt.number(b.cached)} cached · ${fmt.number(b.failed)} failed · ${fmt.number(b.skipped)} skipped · ${fmt.number(b.total)} total</div>
          </li>`;
        })}</ul>`}
  </section>`;
}

/** " — now 1.5 s" for a pause of a second or more, as the operator reads it. */
function pauseText(raw) {
  const ms = Number(raw);
  if (!Number.isFinite(ms) || ms < 1000) return '';
  return ' — now ' + (ms < 60_000 ? (Math.round(ms / 100) / 10).toLocaleString('en-US') + ' s' : fmt.duration(ms));
}

/** Client-side checks; the server validates too and its field error wins. */
function validate(v) {
  const bs = Number(v.batchSize);
  if (v.batchSize === '' || !Number.isInteger(bs) || bs < 1 || bs > 500) {
    return { field: 'batchSize', message: 'Batch size must be a whole number from 1 to 500.' };
  }
  const bp = Number(v.batchPauseMs);
  if (v.batchPauseMs === '' || !Number.isInteger(bp) || bp < 0) {
    return { field: 'batchPauseMs', message: 'The pause between batches must be a whole number of ms, 0 or more.' };
  }
  return null;
}

/** The rate new settings would allow, from the server's estimate for the current ones. */
function estimateFor(status, v) {
  const cur = status.settings || {};
  const est = status.estimatedPerMinute;
  const bs = Number(v.batchSize);
  const bp = Number(v.batchPauseMs);
  if (!est || !cur.batchSize || !(bs >= 1) || !(bp >= 0)) return null;
  const gap = 60000 / est - (cur.batchPauseMs || 0) / cur.batchSize;
  const perRow = Math.max(0, gap) + bp / bs;
  return perRow > 0 ? 60000 / perRow : null;
}

function Settings({ ctx, status, onSaved }) {
  const server = status.settings || {};
  const [draft, setDraft] = useState(null);
  const [err, setErr] = useState(null);
  const [saving, setSaving] = useState(false);
  const v = draft || { batchSize: String(server.batchSize ?? ''), batchPauseMs: String(server.batchPauseMs ?? ''), auto: !!server.auto };
  const set = (k, val) => {
    setDraft({ ...v, [k]: val });
    if (err && (err.field === k || !err.field)) setErr(null);
  };

  useEffect(() => {
    if (err && err.field) {
      const el = document.getElementById('bf-set-' + err.field);
      el && el.focus();
    }
  }, [err]);

  const submit = async (e) => {
    e.preventDefault();
    // The fields themselves are the truth at submit time (state may lag one render).
    const form = e.currentTarget;
    const cur = {
      batchSize: form.elements.batchSize.value.trim(),
      batchPauseMs: form.elements.batchPauseMs.value.trim(),
      auto: form.elements.auto.checked,
    };
    const bad = validate(cur);
    if (bad) {
      setDraft(cur);
      setErr(bad);
      return;
    }
    setSaving(true);
    setErr(null);
    try {
      const st = await ctx.api('/api/backfill/settings', {
        method: 'PUT',
        body: { batchSize: Number(cur.batchSize), batchPauseMs: Number(cur.batchPauseMs), auto: !!cur.auto },
      });
      if (st && Array.isArray(st.jobs)) onSaved(st);
      setDraft(null);
      ctx.notify('Backfill settings saved.', 'ok');
    } catch (x) {
      setErr({ field: x.field || null, message: x.message });
    } finally {
      setSaving(false);
    }
  };

  const est = estimateFor(status, v);
  const errFor = (f) =>
    err && err.field === f
      ? html`<p class="field-error" id=${'bf-set-' + f + '-err'} role="alert" data-testid="settings-error">${err.message}</p>`
      : null;
  const inv = (f) => !!(err && err.field === f);
  const dirty = !!draft;
  return html`<section class="card" aria-labelledby="bf-settings">
    <header class="card-head"><h2 id="bf-settings">Settings</h2>${dirty ? html`<${Badge} kind="warn">unsaved<//>` : null}</header>
    <form class="form" onSubmit=${submit} novalidate data-testid="settings-form">
      <div class=${'field' + (inv('batchSize') ? ' field-invalid' : '')}>
        <label for="bf-set-batchSize">Batch size</label>
        <input id="bf-set-batchSize" name="batchSize" type="number" min="1" max="500" step="1" inputmode="numeric" required
          value=${v.batchSize} onInput=${(e) => set('batchSize', e.currentTarget.value)}
          aria-invalid=${inv('batchSize') ? 'true' : 'false'} aria-describedby="bf-set-batchSize-hint bf-set-batchSize-err"
          data-testid="settings-batchSize" />
        <p class="hint" id="bf-set-batchSize-hint">Preview rows per batch, 1–500.</p>
        ${errFor('batchSize')}
      </div>
      <div class=${'field' + (inv('batchPauseMs') ? ' field-invalid' : '')}>
        <label for="bf-set-batchPauseMs">Pause between batches (ms)</label>
        <input id="bf-set-batchPauseMs" name="batchPauseMs" type="number" min="0" step="100" inputmode="numeric" required
          value=${v.batchPauseMs} onInput=${(e) => set('batchPauseMs', e.currentTarget.value)}
          aria-invalid=${inv('batchPauseMs') ? 'true' : 'false'} aria-describedby="bf-set-batchPauseMs-hint bf-set-batchPauseMs-err"
          data-testid="settings-batchPauseMs" />
        <p class="hint" id="bf-set-batchPauseMs-hint">Cooldown after each batch: 0 to 3,600,000 ms (one hour)${pauseText(v.batchPauseMs)}.</p>
        ${errFor('batchPauseMs')}
      </div>
      <div class=${'field field-check' + (inv('auto') ? ' field-invalid' : '')}>
        <input id="bf-set-auto" name="auto" type="checkbox" checked=${!!v.auto} onChange=${(e) => set('auto', e.currentTarget.checked)} data-testid="settings-auto" />
        <label for="bf-set-auto">Start jobs with pending rows when owed starts</label>
        ${errFor('auto')}
      </div>
      ${err && !['batchSize', 'batchPauseMs', 'auto'].includes(err.field)
        ? html`<p class="field-error" role="alert" data-testid="settings-error">${err.message}</p>`
        : null}
      <p class="hint" aria-live="polite">${est ? html`About <strong>${fmt.rate(est)}</strong> with these settings (media gaps included).` : ''}</p>
      <div class="row">
        <button type="submit" class="btn btn-primary" disabled=${saving} data-testid="settings-save">${saving ? 'Saving…' : 'Save settings'}</button>
        ${dirty ? html`<button type="button" class="btn btn-quiet" onClick=${() => { setDraft(null); setErr(null); }}>Reset</button>` : null}
      </div>
    </form>
  </section>`;
}

export default {
  id: 'backfill',
  title: 'Backfill',
  mount(el, ctx) {
    render(html`<${Backfill} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
