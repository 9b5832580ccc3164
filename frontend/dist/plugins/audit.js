// Audit: every operator action — holds, verdicts and overturns, retries, tokens, disables,
// budgets, webhooks, backfill, model probes — who did it, when, on what, and what changed;
// newest first, filtered by action or target, older pages by cursor; an item's target links to
// the item's page. Data: GET /api/admin/audit.

import { html, render, useState, useEffect } from '../vendor/preact-htm.js';
import { useNow, Rel, Badge, LoadError, Loading, Empty, MoreButton, TableWrap, FilterInput, AuditValue, ItemPageLink, itemOfTarget } from '../lib/ui.js';

const PAGE = 50;
const ACTIONS = ['holds.set', 'verdict.decide', 'verdict.overturn', 'job.retry', 'jobs.retry', 'user.create', 'user.token.rotate',
  'user.disable', 'user.enable', 'user.budget', 'webhook.create', 'webhook.update', 'webhook.delete', 'backfill.start',
  'backfill.pause', 'backfill.settings', 'backfill.walk.release', 'model.probe', 'appeal.decide', 'webhook.secret.rotate',
  'review.claim', 'review.release'];

function Audit({ ctx }) {
  const [filters, setFilters] = useState(() => ({ action: ctx.params().get('action') || '', target: ctx.params().get('target') || '' }));
  const [rows, setRows] = useState([]);
  const [cursor, setCursor] = useState(null);
  const [error, setError] = useState(null);
  const [loaded, setLoaded] = useState(false);
  const [busy, setBusy] = useState(false);
  const now = useNow(5000);
  const key = JSON.stringify(filters);
  const query = (extra) => {
    const q = { limit: PAGE, ...extra };
    if (filters.action) q.action = filters.action;
    if (filters.target) q.target = filters.target;
    return q;
  };
  useEffect(() => {
    ctx.setParams && ctx.setParams(filters);
    setLoaded(false);
    let stale = false;
    const stop = ctx.poll(async () => {
      try {
        const r = await ctx.api('/api/admin/audit', { query: query({}) });
        if (stale) return;
        setRows((cur) => {
          const fresh = (r && r.entries) || [];
          const known = new Set(fresh.map((e) => e.id));
          return fresh.concat(cur.filter((e) => !known.has(e.id) && fresh.length && e.id < fresh[fresh.length - 1].id));
        });
        setCursor((c) => c || (r && r.nextCursor) || null);
        setError(null);
        setLoaded(true);
      } catch (e) {
        if (!stale) setError(e);
      }
    }, 5000);
    return () => {
      stale = true;
      stop && stop();
      setRows([]);
      setCursor(null);
    };
  }, [key]);
  const more = async () => {
    setBusy(true);
    try {
      const r = await ctx.api('/api/admin/audit', { query: query({ cursor }) });
      setRows((cur) => cur.concat((r && r.entries) || []));
      setCursor((r && r.nextCursor) || null);
    } catch (e) {
      setError(e);
    }
    setBusy(false);
  };
  return html`<div class="stack">
    <form class="card filters" onSubmit=${(e) => e.preventDefault()} aria-label="Audit filters" data-testid="audit-filters">
      <div class="field">
        <label for="af-action">Action</label>
        <select id="af-action" value=${filters.action} onChange=${(e) => setFilters((f) => ({ ...f, action: e.currentTarget.value }))} data-testid="audit-filter-action">
          <option value="">any</option>
          ${ACTIONS.map((a) => html`<option value=${a}>${a}</option>`)}
        </select>
      </div>
      <div class="field">
        <label for="af-target">Target</label>
        <${FilterInput} id="af-target" value=${filters.target} onApply=${(v) => setFilters((f) => ({ ...f, target: v }))} placeholder="e.g. job:12, user:3, holds" testid="audit-filter-target" />
      </div>
    </form>
    <section class="card card-flush" aria-label="Audit trail">
      <header class="card-head card-pad"><h2>Audit trail</h2><span class="muted small">who did what, newest first</span></header>
      <div class="card-pad"><${LoadError} error=${error} retry=${() => setFilters((f) => ({ ...f }))} /></div>
      ${!loaded && !error ? html`<div class="card-pad"><${Loading} /></div>` : null}
      ${loaded && !rows.length ? html`<div class="card-pad"><${Empty}>No operator action recorded${filters.action || filters.target ? ' matches this filter' : ' yet'}.<//></div>` : null}
      ${rows.length
        ? html`<${TableWrap} label="Audit trail table">
            <table class="table table-compact table-attempts table-wrapping table-audit" data-testid="audit-table">
              <thead><tr><th scope="col">When</th><th scope="col">Admin</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Before</th><th scope="col">After</th></tr></thead>
              <tbody>${rows.map((e) => html`<tr key=${e.id} data-testid=${'audit-row-' + e.id}>
                <td data-label="when"><${Rel} at=${e.at} now=${now} /></td>
                <td data-label="admin">${e.adminName}</td>
                <td class="c-err"><${Badge} kind="accent">${e.action}<//></td>
                <td data-label="target"><${Target} ctx=${ctx} target=${e.target} id=${e.id} /></td>
                <td data-label="before" class="c-wrap"><${AuditValue} v=${e.before} /></td>
                <td data-label="after" class="c-wrap"><${AuditValue} v=${e.after} /></td>
              </tr>`)}</tbody>
            </table>
          <//>`
        : null}
      <div class="card-pad"><${MoreButton} cursor=${cursor} busy=${busy} onClick=${more} label="Older" testid="audit-more" /></div>
    </section>
  </div>`;
}

/** An entry's target; an item's links to its page. */
function Target({ ctx, target, id }) {
  const it = itemOfTarget(target);
  if (!it) return html`<code>${target}</code>`;
  return html`<${ItemPageLink} ctx=${ctx} kind=${it.kind} id=${it.id} testid=${'audit-item-' + id}><code>${target}</code><//>`;
}

export default {
  id: 'audit',
  title: 'Audit',
  mount(el, ctx) {
    render(html`<${Audit} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
