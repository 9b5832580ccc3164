// Events: every screen and score attempt, newest first, filtered, live (new events appear on
// top every 3 s; paused while the page is hidden or on request), and "older" pages by cursor.
// Data: GET /api/admin/events.

import { html, render, useState, useEffect, useRef } from '../vendor/preact-htm.js';
import { fmt } from '../lib/fmt.js';
import { useNow, useAuthors, Author, attemptNo, Rel, Badge, WhyBadge, OutcomeBadge, resultOf, LoadError, Loading, Empty, MoreButton, TableWrap, WHYS, FilterInput, ErrorText, ItemPageLink } from '../lib/ui.js';

const PAGE = 50;
// The table holds at most this many rows (a window): a live refresh then re-renders a few
// hundred rows, never thousands. Older pages past it drop the newest rows and pause live.
const MAX_ROWS = 300;
const KEYS = ['event', 'outcome', 'why', 'kind', 'userId', 'itemId'];
const EMPTY = Object.fromEntries(KEYS.map((k) => [k, '']));

function fromParams(p) {
  const f = { ...EMPTY };
  for (const k of KEYS) f[k] = p.get(k) || '';
  return f;
}

function Events({ ctx }) {
  const [filters, setFilters] = useState(() => fromParams(ctx.params()));
  const [live, setLive] = useState(true);
  const [view, setView] = useState({ rows: [], cursor: null, loaded: false, fresh: new Set() });
  const [error, setError] = useState(null);
  const [older, setOlder] = useState(false);
  const viewRef = useRef(view);
  viewRef.current = view;
  const liveRef = useRef(live);
  liveRef.current = live;
  const stopRef = useRef(null);
  const now = useNow(5000);
  const names = useAuthors(ctx);
  const key = JSON.stringify(filters);

  useEffect(() => ctx.onParams && ctx.onParams((p) => setFilters(fromParams(p))), []);

  useEffect(() => {
    ctx.setParams && ctx.setParams(filters);
    setView({ rows: [], cursor: null, loaded: false, fresh: new Set() });
    setError(null);
    let first = true;
    let stale = false;
    const stop = ctx.poll(async () => {
      if (!first && !liveRef.current) return;
      try {
        const r = await ctx.api('/api/admin/events', { query: { ...filters, limit: PAGE } });
        if (stale) return;
        const incoming = (r && r.events) || [];
        const cur = viewRef.current;
        let next;
        if (first || !cur.loaded) {
          next = { rows: incoming, cursor: (r && r.nextCursor) || null, loaded: true, fresh: new Set() };
        } else {
          const known = new Set(cur.rows.map((e) => e.id));
          const add = incoming.filter((e) => !known.has(e.id));
          if (add.length && add.length === incoming.length && r.nextCursor) {
            // More arrived than one page: start over from the newest page, no gap.
            next = { rows: incoming, cursor: r.nextCursor, loaded: true, fresh: new Set(incoming.map((e) => e.id)) };
          } else {
            next = { ...cur, rows: add.concat(cur.rows).slice(0, MAX_ROWS), fresh: new Set(add.map((e) => e.id)) };
          }
        }
        first = false;
        viewRef.current = next;
        setView(next);
        setError(null);
      } catch (e) {
        if (!stale) setError(e);
      }
    }, 3000);
    stopRef.current = stop;
    return () => {
      stale = true;
      stop();
    };
  }, [key]);

  useEffect(() => {
    if (live && stopRef.current) stopRef.current.now();
  }, [live]);

  const loadOlder = async () => {
    setOlder(true);
    try {
      const cur = viewRef.current;
      const r = await ctx.api('/api/admin/events', { query: { ...filters, limit: PAGE, cursor: cur.cursor } });
      const known = new Set(cur.rows.map((e) => e.id));
      const add = ((r && r.events) || []).filter((e) => !known.has(e.id));
      let rows = viewRef.current.rows.concat(add);
      if (rows.length > MAX_ROWS) {
        rows = rows.slice(rows.length - MAX_ROWS);
        setLive(false); // the window no longer holds the newest events
      }
      const next = { ...viewRef.current, rows, cursor: (r && r.nextCursor) || null, fresh: new Set() };
      viewRef.current = next;
      setView(next);
    } catch (e) {
      ctx.notify('Could not load older events: ' + e.message, 'error');
    } finally {
      setOlder(false);
    }
  };

  const set = (k) => (e) => setFilters((f) => ({ ...f, [k]: e.currentTarget.value.trim() }));
  const apply = (k) => (v) => setFilters((f) => ({ ...f, [k]: v }));
  // The author: an id (#12 or 12), or a name (any case; the one that matches exactly, else the
  // only one that contains it).
  const applyAuthor = (v) => {
    const text = String(v || '').trim();
    if (text === '' || /^#?\d+$/.test(text)) return setFilters((f) => ({ ...f, userId: text.replace('#', '') }));
    const low = text.toLowerCase();
    const all = Object.entries(names || {});
    const exact = all.filter(([, n]) => String(n).toLowerCase() === low);
    const part = all.filter(([, n]) => String(n).toLowerCase().includes(low));
    const hit = exact.length === 1 ? exact[0] : part.length === 1 ? part[0] : null;
    if (!hit) {
      ctx.notify(part.length > 1 ? `Several authors match “${text}”: type more of the name.` : `No author is named “${text}”.`, 'error');
      return;
    }
    setFilters((f) => ({ ...f, userId: String(hit[0]) }));
  };
  const any = KEYS.some((k) => filters[k] !== '');
  const rows = view.rows;

  return html`<div class="stack">
    <form class="card filters" onSubmit=${(e) => e.preventDefault()} aria-label="Event filters" data-testid="events-filters">
      <div class="field">
        <label for="ef-event">Event</label>
        <select id="ef-event" value=${filters.event} onChange=${set('event')}>
          <option value="">any</option><option value="screen">screen</option><option value="score">score</option>
        </select>
      </div>
      <div class="field">
        <label for="ef-outcome">Outcome</label>
        <select id="ef-outcome" value=${filters.outcome} onChange=${set('outcome')}>
          <option value="">any</option>
          ${['allow', 'block', 'scored', 'pending', 'decided', 'overturned'].map((o) => html`<option value=${o}>${o}</option>`)}
        </select>
      </div>
      <div class="field">
        <label for="ef-why">Why</label>
        <select id="ef-why" value=${filters.why} onChange=${set('why')}>
          <option value="">any</option>
          ${WHYS.map((w) => html`<option value=${w}>${w === 'none' ? 'none' : w}</option>`)}
        </select>
      </div>
      <div class="field">
        <label for="ef-kind">Kind</label>
        <select id="ef-kind" value=${filters.kind} onChange=${set('kind')}>
          <option value="">any</option><option value="revision">revision</option><option value="comment">comment</option><option value="pitch">pitch</option>
        </select>
      </div>
      <div class="field field-narrow">
        <label for="ef-user">Author</label>
        <${FilterInput} id="ef-user" value=${filters.userId ? (names && names[filters.userId]) || filters.userId : ''} onApply=${applyAuthor}
          placeholder="name or id" testid="events-filter-user" />
      </div>
      <div class="field field-narrow">
        <label for="ef-item">Item id</label>
        <${FilterInput} id="ef-item" inputmode="numeric" value=${filters.itemId} onApply=${apply('itemId')} testid="events-filter-item" />
      </div>
      <div class="field field-actions">
        <button type="button" class="btn btn-quiet" disabled=${!any} onClick=${() => setFilters({ ...EMPTY })}>Clear</button>
        <label class="toggle">
          <input type="checkbox" checked=${live} onChange=${(e) => setLive(e.currentTarget.checked)} data-testid="events-live" />
          <span>Live</span>
        </label>
        <span class=${'live-dot' + (live ? ' live-on' : '')} aria-hidden="true"></span>
      </div>
    </form>

    <section class="card card-flush" aria-labelledby="ev-h">
      <header class="card-head card-pad">
        <h2 id="ev-h">Attempt events</h2>
        <span class="muted small" aria-live="polite">${view.loaded ? `${fmt.number(rows.length)} shown${live ? ', live' : ', paused'}` : ''}</span>
      </header>
      <div class="card-pad"><${LoadError} error=${error} retry=${() => stopRef.current && stopRef.current.now()} /></div>
      ${!view.loaded && !error ? html`<div class="card-pad"><${Loading} /></div>` : null}
      ${view.loaded && !rows.length ? html`<div class="card-pad"><${Empty}>${any ? 'No event matches this filter.' : 'No attempt has been made yet.'}<//></div>` : null}
      ${rows.length
        ? html`<${TableWrap} label="Events table">
            <table class="table" data-testid="events-table">
              <thead><tr>
                <th scope="col">When</th><th scope="col">Event</th><th scope="col">Kind</th><th scope="col" class="num">Item</th><th scope="col">Author</th>
                <th scope="col">Outcome</th><th scope="col">Why</th><th scope="col">Error or note</th><th scope="col" class="num">Status</th><th scope="col" class="num">Upstream</th>
                <th scope="col" class="num" title="1 is the first attempt">Attempt</th><th scope="col" class="num">Result</th><th scope="col" class="num">Request</th><th scope="col" class="num">Runs</th>
              </tr></thead>
              <tbody>${rows.map((e) => html`<tr key=${e.id} data-testid=${'event-row-' + e.id} class=${view.fresh.has(e.id) ? 'row-new' : ''}>
                <td><${Rel} at=${e.at} now=${now} /></td>
                <td><${Badge} kind=${e.event === 'score' ? 'accent' : 'neutral'}>${e.event}<//></td>
                <td>${e.kind}</td>
                <td class="num"><${ItemPageLink} ctx=${ctx} kind=${e.kind} id=${e.itemId} testid=${'event-item-' + e.id}>${e.itemId}<//></td>
                <td><${Author} id=${e.userId} names=${names} /></td>
                <td><${OutcomeBadge} outcome=${e.outcome} /></td>
                <td>${e.why ? html`<${WhyBadge} why=${e.why} />` : html`<span class="muted">—</span>`}</td>
                <td class="cell-error">${e.outcome === 'decided' || e.outcome === 'overturned'
                  ? html`<span class="small">${e.verdict} by admin #${e.adminId}${e.note ? html`: <q>${e.note}</q>` : ''}</span>`
                  : html`<${ErrorText} text=${e.error} testid=${'event-error-' + e.id} />`}</td>
                <td class="num">${e.status ?? '—'}</td>
                <td class="num">${e.upstreamMs == null ? '—' : fmt.duration(e.upstreamMs)}</td>
                <td class="num">${attemptNo(e)}</td>
                <td class="num">${resultOf(e)}</td>
                <td class="num">${fmt.bytes(e.requestBytes)}</td>
                <td class="num">${e.runs ?? '—'}</td>
              </tr>`)}</tbody>
            </table>
          <//>`
        : null}
      <${MoreButton} cursor=${view.cursor} busy=${older} onClick=${loadOlder} label="Older" testid="events-older" />
    </section>
  </div>`;
}

export default {
  id: 'events',
  title: 'Events',
  mount(el, ctx) {
    render(html`<${Events} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
