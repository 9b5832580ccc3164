// Content jobs: the owed screen and score jobs, filtered (job id, author name or id, item id,
// task, kind, why, state; state done lists the jobs settled within OWED_RETAIN_DONE with their
// outcome) and sorted (id, due time, attempts), with why each one waits and its
// last error, the total that matches, a job's detail with its item, author and every attempt
// (deep link: ?job=123, or #/jobs/123), retry (one, or every job matching the filter) and a
// verdict by hand. Data: GET /api/admin/jobs (every 5 s), GET /api/admin/jobs/{id},
// POST …/retry, POST /api/admin/items/{kind}/{id}/verdict.

import { html, render, useState, useEffect, useRef } from '../vendor/preact-htm.js';
import { fmt } from '../lib/fmt.js';
import { useLive, useNow, useAuthors, Author, Rel, Badge, WhyBadge, LoadError, Loading, Empty, TableWrap, WHYS, whyInfo, FilterInput, ErrorText, Confirm, ItemPageLink, AttemptHeads, AttemptCells, OutcomeBadge, resultOf } from '../lib/ui.js';

const PAGE = 50;
const FILTER_KEYS = ['id', 'task', 'kind', 'why', 'state', 'author', 'userId', 'itemId'];
const EMPTY = { id: '', task: '', kind: '', why: '', state: '', author: '', userId: '', itemId: '', sort: '' };
const NUMERIC = new Set(['id', 'userId', 'itemId']);

function fromParams(params) {
  const f = { ...EMPTY };
  for (const k of Object.keys(EMPTY)) f[k] = params.get(k) || '';
  return f;
}

/** The filter as the bulk-retry body: empty values left out, ids as numbers. */
function filterBody(f) {
  const b = {};
  for (const k of FILTER_KEYS) {
    if (f[k] === '') continue;
    if (k === 'author' && /^#?\d+$/.test(f[k])) b.userId = Number(f[k].replace('#', ''));
    else b[k] = NUMERIC.has(k) ? Number(f[k]) : f[k];
  }
  return b;
}

/** The filter as the list's query: the author as typed (the server reads a name or an id). */
function filterQuery(f) {
  const q = {};
  for (const k of FILTER_KEYS) if (f[k] !== '') q[k] = f[k];
  if (f.sort) q.sort = f.sort;
  return q;
}

const LABEL = { id: 'job', userId: 'author id', itemId: 'item' };
function describe(f) {
  const parts = FILTER_KEYS.filter((k) => f[k] !== '').map((k) => `${LABEL[k] || k} ${k === 'why' && f[k] === 'none' ? 'none (ready)' : f[k]}`);
  return parts.length ? parts.join(', ') : 'no filter (every owed job)';
}

/** A job's item as a link to the job's detail: its title (a comment's or pitch's opening words). */
function ItemLink({ ctx, j, onOpen }) {
  const label = j.itemTitle || `${j.kind} #${j.itemId}`;
  return html`<a href=${'/admin/jobs?job=' + j.id} class="item-link" title=${`${j.kind} ${j.itemId}: ${label}`} data-testid=${'job-item-' + j.id}
    onClick=${(e) => {
      if (e.metaKey || e.ctrlKey || e.shiftKey || e.button === 1) return;
      e.preventDefault();
      onOpen(j.id, e.currentTarget);
    }}>${label}</a> <${ItemPageLink} ctx=${ctx} kind=${j.kind} id=${j.itemId} testid=${'job-item-page-' + j.id}><span class="small num">${j.kind} #${j.itemId}</span><//>`;
}

/** done (settled), or leased, due or waiting as of now (the clock at render, which may be newer
 * than the tick). */
function jobState(j, tick) {
  if (j.state === 'done') return 'done';
  const now = Math.max(tick, Date.now());
  if (j.leaseUntil && Date.parse(j.leaseUntil) > now) return 'leased';
  if (j.why === 'held') return 'held'; // claimed by no one: not due, whatever its time
  if (j.why === 'breaker') return 'waiting'; // not asked before the model's probe
  if (!j.dueAt || Date.parse(j.dueAt) <= now) return 'due';
  return 'waiting';
}
const STATE_KIND = { leased: 'info', due: 'warn', waiting: 'neutral', held: 'info', done: 'ok' };

/** Whether Retry can run the job: the server refuses a held one (lift the hold) and one in
 * review (a moderator's verdict settles it), so neither offers the button. */
const retryable = (j) => j.state !== 'done' && j.why !== 'held' && j.why !== 'review';

/** How a settled job ended: its outcome, the settling attempt's result, and who decided by hand. */
function Settled({ j }) {
  const f = j.final || {};
  return html`<span data-testid=${'job-outcome-' + j.id}><${OutcomeBadge} outcome=${j.outcome} />${f.verdict ? html` <span class="small">${f.verdict}</span>` : null}
    <span class="small">${f.adminId ? `by admin #${f.adminId}` : resultOf(f)}</span></span>`;
}

/** When the job runs next: a held job waits for the hold's lifting, whatever its due time; a
 * job in review is due never (it waits for a moderator's verdict, not for a time). */
function NextAttempt({ j, now }) {
  if (j.state === 'done') return html`<span title="when it settled: nothing more is owed">settled <${Rel} at=${j.dueAt} now=${now} /></span>`;
  if (j.why === 'held') return html`<span class="muted" title="nothing held runs: lift the hold to run it">when the hold is lifted</span>`;
  if (j.why === 'review') return html`<span class="muted" title="decided in the Review panel">when a moderator decides</span>`;
  return html`<${Rel} at=${j.dueAt} now=${now} />`;
}

function Jobs({ ctx }) {
  const [filters, setFilters] = useState(() => fromParams(ctx.params()));
  // Pages, not an ever longer table: the page's cursor and the cursors of the pages before it.
  // They belong to one filter (key): another filter starts at its first page at once.
  const [pagesOf, setPages] = useState({ key: '', cursor: null, back: [] });
  const [selected, setSelected] = useState(() => ctx.params().get('job') || null);
  const opener = useRef(null); // what opened the detail: focus goes back to it on close
  const [bulk, setBulk] = useState(null); // null | {phase:'counting'} | {phase:'confirm', count, atLeast} | {phase:'running'}
  const [picked, setPicked] = useState({}); // job id → {kind, itemId}: screen jobs selected for a verdict
  const [bulkVerdict, setBulkVerdict] = useState(null); // the verdict awaiting confirmation
  const [deciding, setDeciding] = useState(false);
  const now = useNow(5000);
  const names = useAuthors(ctx);
  const key = JSON.stringify(filters);

  useEffect(
    () =>
      ctx.onParams &&
      ctx.onParams((p) => {
        setFilters(fromParams(p));
        setSelected(p.get('job') || null);
      }),
    []
  );
  useEffect(() => {
    ctx.setParams && ctx.setParams({ ...filters, job: selected });
  }, [key, selected]);
  useEffect(() => {
    setBulk(null);
    setPicked({});
  }, [key]);

  const open = (id, from) => {
    opener.current = from || document.activeElement;
    setSelected(String(id));
  };
  const close = () => {
    setSelected(null);
    const back = opener.current;
    opener.current = null;
    // The opener may have been re-rendered meanwhile: find it again by its test id.
    requestAnimationFrame(() => {
      const el = back && back.isConnected ? back : back && back.dataset && document.querySelector(`[data-testid="${back.dataset.testid}"]`);
      if (el) el.focus();
      else document.querySelector('[data-testid="jobs-table"]')?.closest('.table-wrap')?.focus();
    });
  };

  const pages = pagesOf.key === key ? pagesOf : { key, cursor: null, back: [] };
  const query = (extra) => ({ ...filterQuery(filters), limit: PAGE, ...extra });
  const live = useLive(ctx, () => ctx.api('/api/admin/jobs', { query: query(pages.cursor ? { cursor: pages.cursor } : {}) }), 5000, [key, pages.cursor]);

  const rows = (live.data && live.data.jobs) || [];
  const next = live.data && live.data.nextCursor;
  const pageNo = pages.back.length + 1;
  const nextPage = () => setPages({ key, cursor: next, back: pages.back.concat([pages.cursor]) });
  const prevPage = () => setPages({ key, cursor: pages.back[pages.back.length - 1] ?? null, back: pages.back.slice(0, -1) });

  const replaceJob = (job) => {
    if (!job) return;
    live.setData((d) => d && { ...d, jobs: (d.jobs || []).map((j) => (j.id === job.id ? { ...j, ...job } : j)) });
  };

  const retry = async (id) => {
    try {
      const r = await ctx.api(`/api/admin/jobs/${encodeURIComponent(id)}/retry`, { method: 'POST' });
      replaceJob(r && r.job);
      ctx.notify(`Job ${id} runs now.`, 'ok');
      live.refresh();
    } catch (e) {
      ctx.notify(`Job ${id} was not retried: ${e.message}`, 'error');
    }
  };

  const total = live.data && live.data.total;
  const startBulk = () => setBulk({ phase: 'confirm', count: total ?? rows.length, atLeast: false });

  const runBulk = async () => {
    setBulk({ phase: 'running' });
    try {
      const r = await ctx.api('/api/admin/jobs/retry', { method: 'POST', body: filterBody(filters) });
      ctx.notify(retriedText(r), r && r.retried > 0 ? 'ok' : 'info');
    } catch (e) {
      ctx.notify('Bulk retry failed: ' + e.message, 'error');
    }
    setBulk(null);
    live.refresh();
    requestAnimationFrame(() => document.querySelector('[data-testid="jobs-bulk-retry"]')?.focus());
  };
  const cancelBulk = () => {
    setBulk(null);
    requestAnimationFrame(() => document.querySelector('[data-testid="jobs-bulk-retry"]')?.focus());
  };
  // The confirmation takes the focus when it opens; Esc cancels it.
  useEffect(() => {
    if (!bulk || bulk.phase !== 'confirm') return;
    requestAnimationFrame(() => document.querySelector('[data-testid="jobs-bulk-confirm"]')?.focus());
    const onKey = (e) => {
      if (e.key === 'Escape' && !e.defaultPrevented) {
        e.preventDefault();
        cancelBulk();
      }
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, [bulk && bulk.phase]);

  const pickedIds = Object.keys(picked);
  const togglePick = (j) =>
    setPicked((p) => {
      const n = { ...p };
      if (n[j.id]) delete n[j.id];
      else n[j.id] = { kind: j.kind, itemId: j.itemId };
      return n;
    });
  const decideSelected = async () => {
    const verdict = bulkVerdict;
    setDeciding(true);
    let ok = 0;
    const failed = [];
    for (const [id, it] of Object.entries(picked)) {
      try {
        await sendVerdict(ctx, it.kind, it.itemId, verdict, null, false);
        ok++;
      } catch (e) {
        failed.push(`job ${id}: ${e.message}`);
      }
    }
    ctx.notify(`${verdict === 'allow' ? 'Allowed' : 'Blocked'} ${fmt.number(ok)} ${ok === 1 ? 'item' : 'items'}.` + (failed.length ? ` Not decided: ${failed.join('; ')}.` : ''), failed.length ? 'error' : 'ok');
    setDeciding(false);
    setBulkVerdict(null);
    setPicked({});
    live.refresh();
  };

  const set = (k) => (e) => setFilters((f) => ({ ...f, [k]: e.currentTarget.value.trim() }));
  const apply = (k) => (v) => setFilters((f) => ({ ...f, [k]: v, ...(k === 'author' ? { userId: '' } : {}) }));
  const active = FILTER_KEYS.some((k) => filters[k] !== '');
  const settledView = filters.state === 'done'; // settled jobs, listed for OWED_RETAIN_DONE: nothing to retry

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
          <option value="">any</option><option value="due">due</option><option value="waiting">waiting</option><option value="leased">leased</option><option value="done">done (settled)</option>
        </select>
      </div>
      <div class="field">
        <label for="jf-author">Author</label>
        <${FilterInput} id="jf-author" value=${filters.author || (filters.userId ? '#' + filters.userId : '')} onApply=${apply('author')}
          placeholder="name or id" testid="jobs-filter-author" />
      </div>
      <div class="field field-narrow">
        <label for="jf-item">Item id</label>
        <${FilterInput} id="jf-item" inputmode="numeric" value=${filters.itemId} onApply=${apply('itemId')} testid="jobs-filter-item" />
      </div>
      <div class="field field-narrow">
        <label for="jf-id">Job id</label>
        <${FilterInput} id="jf-id" inputmode="numeric" value=${filters.id} onApply=${apply('id')} testid="jobs-filter-id" />
      </div>
      <div class="field">
        <label for="jf-sort">Sort</label>
        <select id="jf-sort" value=${filters.sort} onChange=${set('sort')} data-testid="jobs-sort">
          <option value="">oldest job first</option><option value="due">next attempt first</option><option value="attempts">most attempts first</option>
        </select>
      </div>
      <div class="field field-actions">
        <button type="button" class="btn btn-quiet" disabled=${!active && !filters.sort} onClick=${() => {
          setFilters({ ...EMPTY });
          requestAnimationFrame(() => document.getElementById('jf-task')?.focus());
        }} data-testid="jobs-clear">Clear</button>
        <button type="button" class="btn" onClick=${startBulk} disabled=${!!bulk || !rows.length || settledView} data-testid="jobs-bulk-retry"
          title="Make every job matching this filter due now">${bulk && bulk.phase === 'counting' ? 'Counting…' : 'Retry all matching…'}</button>
      </div>
    </form>

    ${bulk && bulk.phase !== 'counting'
      ? html`<div class="card confirm" role="alertdialog" aria-labelledby="bulk-q" data-testid="jobs-bulk-confirm-box">
          <p id="bulk-q">Retry <strong data-testid="jobs-bulk-count">${bulk.atLeast ? 'at least ' : ''}${fmt.number(bulk.count)}</strong> ${bulk.count === 1 ? 'job' : 'jobs'} matching${' '}
            ${describe(filters)}? They run now; held jobs and jobs whose budget cannot cover them are skipped. (Esc cancels.)</p>
          <div class="row">
            <button type="button" class="btn btn-primary" disabled=${bulk.phase === 'running'} onClick=${runBulk} data-testid="jobs-bulk-confirm">
              ${bulk.phase === 'running' ? 'Retrying…' : `Retry ${bulk.atLeast ? '' : fmt.number(bulk.count) + ' '}${bulk.count === 1 ? 'job' : 'jobs'}`}</button>
            <button type="button" class="btn btn-quiet" disabled=${bulk.phase === 'running'} onClick=${cancelBulk} data-testid="jobs-bulk-cancel">Cancel</button>
          </div>
        </div>`
      : null}

    ${pickedIds.length
      ? html`<div class="card" data-testid="jobs-picked">
          ${bulkVerdict
            ? html`<${Confirm} text=${`${bulkVerdict === 'allow' ? 'Allow' : 'Block'} the ${fmt.number(pickedIds.length)} selected ${pickedIds.length === 1 ? 'item' : 'items'}?`}
                confirmLabel=${deciding ? 'Deciding…' : bulkVerdict === 'allow' ? 'Yes, allow them' : 'Yes, block them'} danger=${bulkVerdict === 'block'} busy=${deciding}
                onConfirm=${decideSelected} onCancel=${() => setBulkVerdict(null)} testid="jobs-picked-confirm" />`
            : html`<div class="row">
                <span data-testid="jobs-picked-count">${fmt.number(pickedIds.length)} selected</span>
                <button type="button" class="btn btn-small" onClick=${() => setBulkVerdict('allow')} data-testid="jobs-picked-allow">Allow selected…</button>
                <button type="button" class="btn btn-small btn-danger" onClick=${() => setBulkVerdict('block')} data-testid="jobs-picked-block">Block selected…</button>
                <button type="button" class="btn btn-small btn-quiet" onClick=${() => setPicked({})} data-testid="jobs-picked-clear">Clear selection</button>
              </div>`}
        </div>`
      : null}

    ${selected !== null ? html`<${JobDetail} ctx=${ctx} id=${selected} names=${names} onClose=${close} onRetry=${retry} onSettled=${() => live.refresh()} />` : null}

    <section class="card card-flush" aria-label=${settledView ? 'Settled jobs' : 'Owed jobs'}>
      <header class="card-head card-pad">
        <h2 data-testid="jobs-heading">${settledView ? 'Settled jobs' : 'Owed jobs'}</h2>
        <span class="muted small" aria-live="polite" data-testid="jobs-count">${live.data ? `${fmt.number(total ?? rows.length)} matching · page ${pageNo} of ${fmt.number(Math.max(1, Math.ceil((total ?? rows.length) / PAGE)))}` : ''}</span>
      </header>
      <div class="card-pad"><${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} /></div>
      ${!live.data && !live.error ? html`<div class="card-pad"><${Loading} /></div>` : null}
      ${live.data && !rows.length
        ? html`<div class="card-pad"><${Empty}>${settledView ? 'No job settled in the retention matches this filter.' : active ? 'No owed job matches this filter.' : 'Nothing is owed: every item is screened and scored.'}<//></div>`
        : null}
      ${rows.length
        ? html`<${TableWrap} label="Owed jobs table">
            <table class="table table-cards" data-testid="jobs-table">
              <thead><tr>
                <th scope="col" class="opt"><span class="sr-only">Select</span></th><th scope="col" class="num">ID</th><th scope="col" class="opt">Task</th><th scope="col">Item</th>
                <th scope="col" class="opt">Author</th><th scope="col" class="opt">State</th><th scope="col">Why and last error</th><th scope="col" class="num opt">Attempts</th>
                <th scope="col" class="num opt">Status</th><th scope="col">Next attempt</th><th scope="col" class="opt">Lease</th><th scope="col"><span class="sr-only">Actions</span></th>
              </tr></thead>
              <tbody>
                ${rows.map((j) => {
                  const st = jobState(j, now);
                  const w = whyInfo(j.why);
                  return html`<tr key=${j.id} data-testid=${'job-row-' + j.id} class=${String(selected) === String(j.id) ? 'row-selected' : ''}>
                    <td class="opt">${j.task === 'screen' && j.state !== 'done'
                      ? html`<input type="checkbox" checked=${!!picked[j.id]} onChange=${() => togglePick(j)} aria-label=${'Select job ' + j.id + ' for a verdict'} data-testid=${'job-pick-' + j.id} />`
                      : null}</td>
                    <td class="num c-id">${j.id}</td>
                    <td class="opt"><${Badge} kind=${j.task === 'score' ? 'accent' : 'neutral'}>${j.task}<//></td>
                    <td class="item-cell"><${ItemLink} ctx=${ctx} j=${j} onOpen=${open} /></td>
                    <td class="opt c-author"><${Author} id=${j.userId} names=${j.userName ? { ...names, [j.userId]: j.userName } : names} /></td>
                    <td class="opt"><${Badge} kind=${STATE_KIND[st]}>${st}<//></td>
                    <td class="why-cell c-why" title=${st === 'done' ? 'how it settled' : w.text}>${st === 'done' ? html`<${Settled} j=${j} />` : html`<${WhyBadge} why=${j.why} />
                      ${j.lastError ? html` <${ErrorText} text=${j.lastError} testid=${'job-error-' + j.id} />` : html` <span class="why-text small">${w.short}</span>`}`}</td>
                    <td class="num opt">${j.attempts}</td>
                    <td class="num opt">${j.status ?? html`<span class="muted">—</span>`}</td>
                    <td class="c-next"><${NextAttempt} j=${j} now=${now} /></td>
                    <td class="opt">${j.leaseUntil && Date.parse(j.leaseUntil) > now ? html`until <${Rel} at=${j.leaseUntil} now=${now} />` : html`<span class="muted">—</span>`}</td>
                    <td class="actions">
                      <button type="button" class="btn btn-small btn-quiet" onClick=${(e) => open(j.id, e.currentTarget)} aria-label=${'Details of job ' + j.id} data-testid=${'job-detail-' + j.id}>Details</button>
                      ${retryable(j) ? html`<button type="button" class="btn btn-small" onClick=${() => retry(j.id)} aria-label=${'Retry job ' + j.id} data-testid=${'job-retry-' + j.id}>Retry</button>` : null}
                    </td>
                  </tr>`;
                })}
              </tbody>
            </table>
          <//>`
        : null}
      ${pageNo > 1 || next
        ? html`<nav class="pager" aria-label="Pages of jobs">
            <button type="button" class="btn btn-small" disabled=${pageNo === 1} onClick=${prevPage} data-testid="jobs-prev">← Previous</button>
            <span class="small muted">page ${pageNo}</span>
            <button type="button" class="btn btn-small" disabled=${!next} onClick=${nextPage} data-testid="jobs-next">Next →</button>
          </nav>`
        : null}
    </section>
  </div>`;
}

function JobDetail({ ctx, id, names, onClose, onRetry, onSettled }) {
  const [gone, setGone] = useState(false);
  const [decided, setDecided] = useState(null); // {kind, itemId, verdict, note, by} once decided here
  useEffect(() => {
    setGone(false);
    setDecided(null);
  }, [id]);
  const live = useLive(
    ctx,
    async () => {
      try {
        return await ctx.api(`/api/admin/jobs/${encodeURIComponent(id)}`);
      } catch (e) {
        if (e.status === 404) setGone(true);
        throw e;
      }
    },
    5000,
    [id]
  );
  const head = useRef(null);
  useEffect(() => {
    head.current && head.current.focus();
  }, [id]);
  useEffect(() => {
    const onKey = (e) => {
      if (e.key === 'Escape' && !e.defaultPrevented) {
        e.preventDefault();
        onClose();
      }
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, [onClose]);
  const d = live.data;
  const j = d && d.job;
  const item = (d && d.item) || {};
  const author = (d && d.author) || {};
  const events = (d && d.events) || [];
  return html`<section class="card" role="dialog" aria-modal="false" aria-labelledby="job-detail-h" data-testid="job-detail">
    <header class="card-head">
      <h2 id="job-detail-h" tabindex="-1" ref=${head}>Job ${id}</h2>
      <div class="row">
        <a class="small" href=${'/admin/jobs?job=' + encodeURIComponent(id)} data-testid="job-detail-link" title="A link to this job">Link</a>
        ${j && !decided && !gone && retryable(j) ? html`<button type="button" class="btn btn-small" onClick=${() => onRetry(id).then(live.refresh)} data-testid="job-detail-retry">Retry now</button>` : null}
        <button type="button" class="btn btn-small btn-quiet" onClick=${onClose} data-testid="job-detail-close" aria-label="Close the job's details (Esc)">Close</button>
      </div>
    </header>
    ${decided
      ? html`<${Decided} ctx=${ctx} d=${decided} onChange=${setDecided} onSettled=${onSettled} />`
      : gone
        ? html`<p class="note note-info" role="status" data-testid="job-detail-gone">Job ${id} is neither owed nor settled within the retention: its item was deleted, or it settled longer ago.</p>`
        : html`<${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} />`}
    ${!j && !live.error ? html`<${Loading} />` : null}
    ${j && !gone && !decided
      ? html`<dl class="kv kv-wide" data-testid="job-detail-facts">
          <dt>Task</dt><dd>${j.task} of <${ItemPageLink} ctx=${ctx} kind=${item.kind} id=${item.id} testid="job-detail-item-page">${item.kind} <span class="num">#${item.id}</span><//></dd>
          <dt>Content</dt><dd data-testid="job-detail-content">${item.content != null ? html`<pre class="item-content">${item.content}</pre>` : html`<span class="muted">(gone)</span>`}</dd>
          <dt>Item</dt><dd data-testid="job-detail-item">${item.title ? html`<q>${item.title}</q>` : html`<span class="muted">(gone)</span>`}${item.songId ? html` <span class="muted small">song #${item.songId}</span>` : null}</dd>
          <dt>Author</dt><dd data-testid="job-detail-author"><${Author} id=${author.id} names=${author.name ? { ...names, [author.id]: author.name } : names} /></dd>
          <dt>Why</dt><dd><${WhyBadge} why=${j.why} long /></dd>
          <dt>Last error</dt><dd data-testid="job-detail-error">${j.lastError ? html`<code class="err-block">${j.lastError}</code>` : html`<span class="muted">—</span>`}</dd>
          <dt>Attempts</dt><dd class="num">${j.attempts}</dd>
          <dt>Last status</dt><dd class="num">${j.status ?? '—'}</dd>
          ${j.state === 'done'
            ? html`<dt>Outcome</dt><dd data-testid="job-detail-outcome"><${Settled} j=${j} /></dd>
                <dt>Settled</dt><dd><${NextAttempt} j=${j} /> <span class="muted small">${fmt.time(j.dueAt)}</span></dd>`
            : html`<dt>Next attempt</dt><dd><${NextAttempt} j=${j} />${j.why === 'held' || j.why === 'review' ? null : html` <span class="muted small">${fmt.time(j.dueAt)}</span>`}</dd>
                <dt>Lease</dt><dd>${j.leaseUntil ? html`<${Rel} at=${j.leaseUntil} />` : '—'}</dd>`}
        </dl>
        ${j.task === 'screen' && j.state !== 'done' ? html`<${Decide} ctx=${ctx} kind=${item.kind} itemId=${item.id} onDone=${(d) => {
          setDecided(d);
          live.refresh();
          onSettled && onSettled();
        }} />` : null}`
      : null}
    <h3>Attempt history</h3>
    ${d && !events.length ? html`<${Empty}>No attempt yet.<//>` : null}
    ${events.length
      ? html`<${TableWrap} label="Attempt history">
          <table class="table table-compact table-attempts" data-testid="job-events">
            <thead><tr><th scope="col">When</th><${AttemptHeads} /></tr></thead>
            <tbody>${events.map((e) => html`<tr key=${e.id}>
              <td data-label="when"><${Rel} at=${e.at} /></td>
              <${AttemptCells} e=${e} />
            </tr>`)}</tbody>
          </table>
        <//>`
      : null}
  </section>`;
}

/** The bulk retry's answer in words: what it did, and what it skipped and why. */
function retriedText(r) {
  const n = (r && r.retried) || 0;
  const sk = (r && r.skipped) || {};
  const skipped = [];
  if (sk.held) skipped.push(`${fmt.number(sk.held)} held (lift the hold to run them)`);
  if (sk.budget) skipped.push(`${fmt.number(sk.budget)} waiting for a budget that still cannot cover them`);
  return `${fmt.number(n)} ${n === 1 ? 'job runs' : 'jobs run'} now.` + (skipped.length ? ` Skipped: ${skipped.join('; ')}.` : '');
}

/** Send a verdict by hand (overturn: change one already given). */
async function sendVerdict(ctx, kind, itemId, verdict, note, overturn, reason) {
  const body = { verdict };
  if (note) body.note = note;
  if (reason) body.reason = reason;
  if (overturn) body.overturn = true;
  return ctx.api(`/api/admin/items/${encodeURIComponent(kind)}/${encodeURIComponent(itemId)}/verdict`, { method: 'POST', body });
}

/** Decide by hand: allow or block the item, with a note (moderators') and a reason (the
 * author's), as the admin's verdict, once confirmed. */
function Decide({ ctx, kind, itemId, onDone }) {
  const [note, setNote] = useState('');
  const [reason, setReason] = useState('');
  const [asking, setAsking] = useState(null); // the verdict awaiting confirmation
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState(null);
  const send = async () => {
    const verdict = asking;
    setBusy(true);
    setErr(null);
    try {
      const r = await sendVerdict(ctx, kind, itemId, verdict, note.trim(), false, reason.trim());
      ctx.notify(`The ${kind} is ${r && r.state === 'public' ? 'allowed' : 'blocked'}: your verdict settled its screen.`, 'ok');
      onDone({ kind, itemId, verdict, note: note.trim() || null, by: ctx.user && ctx.user.name });
    } catch (e) {
      setErr(e);
    }
    setBusy(false);
    setAsking(null);
  };
  const cancel = () => {
    setAsking(null);
    requestAnimationFrame(() => document.querySelector('[data-testid="job-decide-allow"]')?.focus());
  };
  return html`<form class="decide" onSubmit=${(e) => e.preventDefault()} aria-labelledby="decide-h" data-testid="job-decide">
    <h3 id="decide-h">Decide by hand</h3>
    <p class="muted small">Records your verdict instead of the model's; an allowed revision then owes its score. Read the content above first.</p>
    <div class="field">
      <label for="decide-note">Note (optional; moderators and webhooks see it, the author never)</label>
      <input id="decide-note" type="text" maxlength="500" value=${note} onInput=${(e) => setNote(e.currentTarget.value)} data-testid="job-decide-note" />
    </div>
    <div class="field">
      <label for="decide-reason">Reason for the author (optional; shown to them)</label>
      <input id="decide-reason" type="text" maxlength="500" value=${reason} onInput=${(e) => setReason(e.currentTarget.value)} data-testid="job-decide-reason" />
    </div>
    ${err ? html`<p class="field-error" role="alert" data-testid="job-decide-error">${err.message}</p>` : null}
    ${asking
      ? html`<${Confirm} text=${`${asking === 'allow' ? 'Allow' : 'Block'} this ${kind}${note.trim() ? ` with the note “${note.trim()}”` : ''}?`}
          confirmLabel=${busy ? 'Deciding…' : asking === 'allow' ? 'Yes, allow' : 'Yes, block'} danger=${asking === 'block'} busy=${busy}
          onConfirm=${send} onCancel=${cancel} testid="job-decide-confirm" />`
      : html`<div class="row">
          <button type="button" class="btn" onClick=${() => setAsking('allow')} data-testid="job-decide-allow">Allow…</button>
          <button type="button" class="btn btn-danger" onClick=${() => setAsking('block')} data-testid="job-decide-block">Block…</button>
        </div>`}
  </form>`;
}

/** What was decided here, by whom, with the note; and the way to overturn it, with a note of its own. */
function Decided({ ctx, d, onChange, onSettled }) {
  const [asking, setAsking] = useState(false);
  const [note, setNote] = useState('');
  const [busy, setBusy] = useState(false);
  const head = useRef(null);
  useEffect(() => {
    head.current && head.current.focus();
  }, [d.verdict]);
  const other = d.verdict === 'allow' ? 'block' : 'allow';
  const overturn = async () => {
    setBusy(true);
    try {
      await sendVerdict(ctx, d.kind, d.itemId, other, note.trim(), true);
      ctx.notify(`Overturned: the ${d.kind} is ${other === 'allow' ? 'allowed' : 'blocked'} now.`, 'ok');
      onChange({ ...d, verdict: other, note: note.trim(), by: ctx.user && ctx.user.name, overturned: true });
      setNote('');
      onSettled && onSettled();
      setAsking(false); // the verdict's line takes the focus
    } catch (e) {
      ctx.notify('Could not overturn: ' + e.message, 'error');
      cancel();
    }
    setBusy(false);
  };
  // Closing the confirmation unsent gives the focus back to the button that opened it.
  const cancel = () => {
    setAsking(false);
    requestAnimationFrame(() => document.querySelector('[data-testid="job-overturn"]')?.focus());
  };
  return html`<div class="note note-info" role="status" data-testid="job-decided">
    <p tabindex="-1" ref=${head}><strong data-testid="job-decided-verdict">${d.overturned ? 'Overturned to ' : 'Decided: '}${d.verdict}</strong>${' '}by <span data-testid="job-decided-by">${d.by || 'you'}</span>${d.note ? html` — note: <q data-testid="job-decided-note">${d.note}</q>` : null}.
      The job is no longer owed.</p>
    <div class="field">
      <label for="overturn-note">Why overturn (required; moderators and webhooks see it)</label>
      <input id="overturn-note" type="text" maxlength="500" required value=${note} onInput=${(e) => setNote(e.currentTarget.value)} data-testid="job-overturn-note" />
    </div>
    ${asking
      ? html`<${Confirm} text=${`Overturn: ${other} this ${d.kind} instead, with the note “${note.trim()}”? Its webhook is sent again.`} confirmLabel=${busy ? 'Overturning…' : `Yes, ${other}`}
          danger=${other === 'block'} busy=${busy} onConfirm=${overturn} onCancel=${cancel} testid="job-overturn-confirm" />`
      : html`<button type="button" class="btn btn-small" disabled=${!note.trim()} onClick=${() => setAsking(true)} data-testid="job-overturn">Overturn (${other})…</button>`}
  </div>`;
}

export default {
  id: 'jobs',
  title: 'Content jobs',
  mount(el, ctx) {
    render(html`<${Jobs} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
