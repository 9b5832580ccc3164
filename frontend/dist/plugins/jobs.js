// Content jobs: the owed screen and score jobs, filtered, with why each one waits, its
// attempt history, and retry (one, or every job matching the filter).
// Data: GET /api/admin/jobs (every 5 s), GET /api/admin/jobs/{id}, POST …/retry.

import { html, render, useState, useEffect, useRef } from '../vendor/preact-htm.js';
import { fmt } from '../lib/fmt.js';
import { useLive, useNow, useAuthors, Author, attemptNo, Rel, Badge, WhyBadge, OutcomeBadge, resultOf, LoadError, Loading, Empty, MoreButton, TableWrap, WHYS, whyInfo } from '../lib/ui.js';

const PAGE = 50;
const FILTER_KEYS = ['task', 'kind', 'why', 'userId', 'state', 'itemId'];
const EMPTY = { task: '', kind: '', why: '', userId: '', state: '', itemId: '' };

function fromParams(params) {
  const f = { ...EMPTY };
  for (const k of FILTER_KEYS) f[k] = params.get(k) || '';
  return f;
}

/** The filter as the bulk-retry body: empty values left out, ids as numbers. */
function filterBody(f) {
  const b = {};
  for (const k of FILTER_KEYS) {
    if (f[k] === '') continue;
    b[k] = k === 'userId' || k === 'itemId' ? Number(f[k]) : f[k];
  }
  return b;
}

function describe(f) {
  const parts = FILTER_KEYS.filter((k) => f[k] !== '').map((k) => `${k === 'userId' ? 'author' : k === 'itemId' ? 'item' : k} ${k === 'why' && f[k] === 'none' ? 'none (ready)' : f[k]}`);
  return parts.length ? parts.join(', ') : 'no filter (every owed job)';
}

/** leased, due or waiting, as of now (the clock at render, which may be newer than the tick). */
function jobState(j, tick) {
  const now = Math.max(tick, Date.now());
  if (j.leaseUntil && Date.parse(j.leaseUntil) > now) return 'leased';
  if (!j.dueAt || Date.parse(j.dueAt) <= now) return 'due';
  return 'waiting';
}
const STATE_KIND = { leased: 'info', due: 'warn', waiting: 'neutral' };

function Jobs({ ctx }) {
  const [filters, setFilters] = useState(() => fromParams(ctx.params()));
  const [more, setMore] = useState({ rows: [], cursor: null, busy: false, loaded: false });
  const [selected, setSelected] = useState(null);
  const [bulk, setBulk] = useState(null); // null | {phase:'counting'} | {phase:'confirm', count, atLeast} | {phase:'running'}
  const now = useNow(5000);
  const names = useAuthors(ctx);
  const key = JSON.stringify(filters);

  useEffect(() => ctx.onParams && ctx.onParams((p) => setFilters(fromParams(p))), []);
  useEffect(() => {
    ctx.setParams && ctx.setParams(filters);
    setMore({ rows: [], cursor: null, busy: false, loaded: false });
    setBulk(null);
  }, [key]);

  const query = (extra) => ({ ...filterBody(filters), limit: PAGE, ...extra });
  const live = useLive(ctx, () => ctx.api('/api/admin/jobs', { query: query() }), 5000, [key]);

  const first = (live.data && live.data.jobs) || [];
  const seen = new Set(first.map((j) => j.id));
  const rows = first.concat(more.rows.filter((j) => !seen.has(j.id)));
  const cursor = more.loaded ? more.cursor : live.data && live.data.nextCursor;

  const loadMore = async () => {
    setMore((m) => ({ ...m, busy: true }));
    try {
      const r = await ctx.api('/api/admin/jobs', { query: query({ cursor }) });
      setMore((m) => ({ rows: m.rows.concat(r.jobs || []), cursor: r.nextCursor || null, busy: false, loaded: true }));
    } catch (e) {
      setMore((m) => ({ ...m, busy: false }));
      ctx.notify('Could not load more jobs: ' + e.message, 'error');
    }
  };

  const replaceJob = (job) => {
    if (!job) return;
    live.setData((d) => d && { ...d, jobs: (d.jobs || []).map((j) => (j.id === job.id ? job : j)) });
    setMore((m) => ({ ...m, rows: m.rows.map((j) => (j.id === job.id ? job : j)) }));
  };

  const retry = async (id) => {
    try {
      const r = await ctx.api(`/api/admin/jobs/${encodeURIComponent(id)}/retry`, { method: 'POST' });
      replaceJob(r && r.job);
      ctx.notify(`Job ${id} is due now.`, 'ok');
      live.refresh();
    } catch (e) {
      ctx.notify(`Retry of job ${id} failed: ${e.message}`, 'error');
    }
  };

  const startBulk = async () => {
    if (!cursor) {
      setBulk({ phase: 'confirm', count: rows.length, atLeast: false });
      return;
    }
    setBulk({ phase: 'counting' });
    let count = 0;
    let c = null;
    let pages = 0;
    try {
      do {
        const r = await ctx.api('/api/admin/jobs', { query: { ...filterBody(filters), limit: 500, cursor: c } });
        count += (r.jobs || []).length;
        c = r.nextCursor || null;
        pages++;
      } while (c && pages < 20);
      setBulk({ phase: 'confirm', count, atLeast: !!c });
    } catch (e) {
      setBulk(null);
      ctx.notify('Could not count the matching jobs: ' + e.message, 'error');
    }
  };

  const runBulk = async () => {
    setBulk({ phase: 'running' });
    try {
      const r = await ctx.api('/api/admin/jobs/retry', { method: 'POST', body: filterBody(filters) });
      ctx.notify(`${fmt.number(r ? r.retried : 0)} jobs are due now.`, 'ok');
    } catch (e) {
      ctx.notify('Bulk retry failed: ' + e.message, 'error');
    }
    setBulk(null);
    live.refresh();
  };

  const set = (k) => (e) => setFilters((f) => ({ ...f, [k]: e.currentTarget.value.trim() }));
  const active = FILTER_KEYS.some((k) => filters[k] !== '');

  return html`<div class="stack">
    <form class="card filters" onSubmit=${(e) => e.preventDefault()} aria-label="Job filters" data-testid="jobs-filters">
      <div class="field">
        <label for="jf-task">Task</label>
        <select id="jf-task" value=${filters.task} onChange=${set('task')} data-testid="jobs-filter-task">
          <option value="">any</option><option value="screen">screen</option><option value="score">score</option>
        </select>
      </div>
      <div class="field">
        <label for="jf-kind">Kind</label>
        <select id="jf-kind" value=${filters.kind} onChange=${set('kind')} data-testid="jobs-filter-kind">
          <option value="">any</option><option value="revision">revision</option><option value="comment">comment</option><option value="pitch">pitch</option>
        </select>
      </div>
      <div class="field">
        <label for="jf-why">Why</label>
        <select id="jf-why" value=${filters.why} onChange=${set('why')} data-testid="jobs-filter-why">
          <option value="">any</option>
          ${WHYS.map((w) => html`<option value=${w}>${w === 'none' ? 'none (ready)' : w}</option>`)}
        </select>
      </div>
      <div class="field">
        <label for="jf-state">State</label>
        <select id="jf-state" value=${filters.state} onChange=${set('state')} data-testid="jobs-filter-state">
          <option value="">any</option><option value="due">due</option><option value="waiting">waiting</option><option value="leased">leased</option>
        </select>
      </div>
      <div class="field field-narrow">
        <label for="jf-user">Author id</label>
        <input id="jf-user" type="number" min="1" inputmode="numeric" value=${filters.userId} onChange=${set('userId')} data-testid="jobs-filter-user" />
      </div>
      <div class="field field-narrow">
        <label for="jf-item">Item id</label>
        <input id="jf-item" type="search" inputmode="numeric" placeholder="search" value=${filters.itemId} onChange=${set('itemId')} data-testid="jobs-filter-item" />
      </div>
      <div class="field field-actions">
        <button type="button" class="btn btn-quiet" disabled=${!active} onClick=${() => setFilters({ ...EMPTY })}>Clear</button>
        <button type="button" class="btn" onClick=${startBulk} disabled=${!!bulk || !rows.length} data-testid="jobs-bulk-retry"
          title="Make every job matching this filter due now">${bulk && bulk.phase === 'counting' ? 'Counting…' : 'Retry all matching…'}</button>
      </div>
    </form>

    ${bulk && bulk.phase !== 'counting'
      ? html`<div class="card confirm" role="alertdialog" aria-labelledby="bulk-q" data-testid="jobs-bulk-confirm-box">
          <p id="bulk-q">Retry <strong data-testid="jobs-bulk-count">${bulk.atLeast ? 'at least ' : ''}${fmt.number(bulk.count)}</strong> ${bulk.count === 1 ? 'job' : 'jobs'} matching${' '}
            ${describe(filters)}? They become due now and run on the next sweep.</p>
          <div class="row">
            <button type="button" class="btn btn-primary" disabled=${bulk.phase === 'running'} onClick=${runBulk} data-testid="jobs-bulk-confirm">
              ${bulk.phase === 'running' ? 'Retrying…' : `Retry ${bulk.atLeast ? '' : fmt.number(bulk.count) + ' '}${bulk.count === 1 ? 'job' : 'jobs'}`}</button>
            <button type="button" class="btn btn-quiet" disabled=${bulk.phase === 'running'} onClick=${() => setBulk(null)} data-testid="jobs-bulk-cancel">Cancel</button>
          </div>
        </div>`
      : null}

    ${selected !== null ? html`<${JobDetail} ctx=${ctx} id=${selected} names=${names} onClose=${() => setSelected(null)} onRetry=${retry} />` : null}

    <section class="card card-flush" aria-label="Owed jobs">
      <header class="card-head card-pad">
        <h2>Owed jobs</h2>
        <span class="muted small" aria-live="polite">${live.data ? `${fmt.number(rows.length)}${cursor ? '+' : ''} shown` : ''}${more.loaded ? ' · live refresh covers the first page' : ''}</span>
      </header>
      <div class="card-pad"><${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} /></div>
      ${!live.data && !live.error ? html`<div class="card-pad"><${Loading} /></div>` : null}
      ${live.data && !rows.length
        ? html`<div class="card-pad"><${Empty}>${active ? 'No owed job matches this filter.' : 'Nothing is owed: every item is screened and scored.'}<//></div>`
        : null}
      ${rows.length
        ? html`<${TableWrap} label="Owed jobs table">
            <table class="table" data-testid="jobs-table">
              <thead><tr>
                <th scope="col" class="num">ID</th><th scope="col">Task</th><th scope="col">Kind</th><th scope="col" class="num">Item</th>
                <th scope="col">Author</th><th scope="col">State</th><th scope="col">Why</th><th scope="col" class="num">Attempts</th>
                <th scope="col" class="num">Status</th><th scope="col">Next attempt</th><th scope="col">Lease</th><th scope="col"><span class="sr-only">Actions</span></th>
              </tr></thead>
              <tbody>
                ${rows.map((j) => {
                  const st = jobState(j, now);
                  const w = whyInfo(j.why);
                  return html`<tr key=${j.id} data-testid=${'job-row-' + j.id} class=${selected === j.id ? 'row-selected' : ''}>
                    <td class="num">${j.id}</td>
                    <td><${Badge} kind=${j.task === 'score' ? 'accent' : 'neutral'}>${j.task}<//></td>
                    <td>${j.kind}</td>
                    <td class="num">${j.itemId}</td>
                    <td><${Author} id=${j.userId} names=${names} /></td>
                    <td><${Badge} kind=${STATE_KIND[st]}>${st}<//></td>
                    <td class="why-cell" title=${w.text}><${WhyBadge} why=${j.why} /> <span class="why-text small">${w.short}</span></td>
                    <td class="num">${j.attempts}</td>
                    <td class="num">${j.status ?? html`<span class="muted">—</span>`}</td>
                    <td><${Rel} at=${j.dueAt} now=${now} /></td>
                    <td>${j.leaseUntil && Date.parse(j.leaseUntil) > now ? html`until <${Rel} at=${j.leaseUntil} now=${now} />` : html`<span class="muted">—</span>`}</td>
                    <td class="actions">
                      <button type="button" class="btn btn-small btn-quiet" onClick=${() => setSelected(j.id)} aria-label=${'Details of job ' + j.id} data-testid=${'job-detail-' + j.id}>Details</button>
                      <button type="button" class="btn btn-small" onClick=${() => retry(j.id)} aria-label=${'Retry job ' + j.id} data-testid=${'job-retry-' + j.id}>Retry</button>
                    </td>
                  </tr>`;
                })}
              </tbody>
            </table>
          <//>`
        : null}
      <${MoreButton} cursor=${cursor} busy=${more.busy} onClick=${loadMore} testid="jobs-more" />
    </section>
  </div>`;
}

function JobDetail({ ctx, id, names, onClose, onRetry }) {
  const live = useLive(ctx, () => ctx.api(`/api/admin/jobs/${encodeURIComponent(id)}`), 5000, [id]);
  const head = useRef(null);
  useEffect(() => {
    head.current && head.current.focus();
  }, [id]);
  const j = live.data && live.data.job;
  const events = (live.data && live.data.events) || [];
  return html`<section class="card" aria-labelledby="job-detail-h" data-testid="job-detail">
    <header class="card-head">
      <h2 id="job-detail-h" tabindex="-1" ref=${head}>Job ${id}</h2>
      <div class="row">
        <button type="button" class="btn btn-small" onClick=${() => onRetry(id).then(live.refresh)}>Retry now</button>
        <button type="button" class="btn btn-small btn-quiet" onClick=${onClose} data-testid="job-detail-close">Close</button>
      </div>
    </header>
    <${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} />
    ${!j && !live.error ? html`<${Loading} />` : null}
    ${j
      ? html`<dl class="kv kv-wide">
          <dt>Task</dt><dd>${j.task} of ${j.kind} <span class="num">#${j.itemId}</span></dd>
          <dt>Author</dt><dd><${Author} id=${j.userId} names=${names} /></dd>
          <dt>Why</dt><dd><${WhyBadge} why=${j.why} long /></dd>
          <dt>Attempts</dt><dd class="num">${j.attempts}</dd>
          <dt>Last status</dt><dd class="num">${j.status ?? '—'}</dd>
          <dt>Next attempt</dt><dd><${Rel} at=${j.dueAt} /> <span class="muted small">${fmt.time(j.dueAt)}</span></dd>
          <dt>Lease</dt><dd>${j.leaseUntil ? html`<${Rel} at=${j.leaseUntil} />` : '—'}</dd>
        </dl>`
      : null}
    <h3>Attempt history</h3>
    ${live.data && !events.length ? html`<${Empty}>No attempt yet.<//>` : null}
    ${events.length
      ? html`<${TableWrap} label="Attempt history">
          <table class="table table-compact" data-testid="job-events">
            <thead><tr><th scope="col">When</th><th scope="col" class="num" title="1 is the first attempt">Attempt</th><th scope="col">Outcome</th><th scope="col">Why</th>
              <th scope="col" class="num">Status</th><th scope="col" class="num">Upstream</th><th scope="col" class="num">Result</th><th scope="col" class="num">Request</th><th scope="col" class="num">Runs</th></tr></thead>
            <tbody>${events.map((e) => html`<tr key=${e.id}>
              <td><${Rel} at=${e.at} /></td>
              <td class="num">${attemptNo(e)}</td>
              <td><${OutcomeBadge} outcome=${e.outcome} /></td>
              <td>${e.why ? html`<${WhyBadge} why=${e.why} />` : html`<span class="muted">—</span>`}</td>
              <td class="num">${e.status ?? '—'}</td>
              <td class="num">${e.upstreamMs == null ? '—' : fmt.duration(e.upstreamMs)}</td>
              <td class="num">${resultOf(e)}</td>
              <td class="num">${fmt.bytes(e.requestBytes)}</td>
              <td class="num">${e.runs ?? '—'}</td>
            </tr>`)}</tbody>
          </table>
        <//>`
      : null}
  </section>`;
}

export default {
  id: 'jobs',
  title: 'Content jobs',
  mount(el, ctx) {
    render(html`<${Jobs} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
