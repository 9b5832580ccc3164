// Webhooks: subscriptions (create with a secret shown once, enable/disable, delete) and each
// one's deliveries with attempts and redelivery.
// Data: /api/admin/webhooks, /api/admin/webhooks/{id}/deliveries (each with its latest
// attempts), GET /api/admin/webhooks/deliveries/{id} (every attempt and the payload),
// POST /api/admin/webhooks/deliveries/{id}/redeliver.

import { html, render, useState, useRef } from '../vendor/preact-htm.js';
import { fmt } from '../lib/fmt.js';
import { useLive, useNow, Rel, Badge, LoadError, Loading, Empty, MoreButton, TableWrap, ErrorText } from '../lib/ui.js';

const EVENTS = [
  ['item.screened', 'an item got its verdict'],
  ['song.scored', 'a song revision got its art score'],
  ['backfill.finished', 'a backfill job finished'],
  ['model.breaker', "the model's breaker opened or closed"],
  ['item.appeal.decided', "a moderator decided an author's appeal"],
  ['model.drift', 'the live model drifted from its anchor set'],
  ['*', 'every event, including future ones'],
];

function Webhooks({ ctx }) {
  const live = useLive(ctx, () => ctx.api('/api/admin/webhooks'), 5000);
  const now = useNow(10000);
  const [secret, setSecret] = useState(null); // {id, url, secret}
  const [open, setOpen] = useState(null); // webhook id whose deliveries show
  const [confirmDelete, setConfirmDelete] = useState(null);
  const [busy, setBusy] = useState(null);
  const hooks = (live.data && live.data.webhooks) || [];

  const patch = (w) => live.setData((d) => d && { ...d, webhooks: (d.webhooks || []).map((x) => (x.id === w.id ? { ...x, ...w } : x)) });

  const toggle = async (w) => {
    setBusy('toggle:' + w.id);
    try {
      const r = await ctx.api(`/api/admin/webhooks/${encodeURIComponent(w.id)}`, { method: 'PATCH', body: { active: !w.active } });
      patch(r && r.webhook ? r.webhook : { id: w.id, active: !w.active });
      ctx.notify(`Webhook ${w.id} ${w.active ? 'disabled' : 'enabled'}.`, 'ok');
    } catch (e) {
      ctx.notify(`Could not ${w.active ? 'disable' : 'enable'} webhook ${w.id}: ${e.message}`, 'error');
    } finally {
      setBusy(null);
    }
  };

  const remove = async (w) => {
    setBusy('delete:' + w.id);
    try {
      await ctx.api(`/api/admin/webhooks/${encodeURIComponent(w.id)}`, { method: 'DELETE' });
      live.setData((d) => d && { ...d, webhooks: (d.webhooks || []).filter((x) => x.id !== w.id) });
      if (open === w.id) setOpen(null);
      ctx.notify(`Webhook ${w.id} deleted.`, 'ok');
    } catch (e) {
      ctx.notify(`Could not delete webhook ${w.id}: ${e.message}`, 'error');
    } finally {
      setBusy(null);
      setConfirmDelete(null);
    }
  };

  return html`<div class="stack">
    ${secret ? html`<${Secret} s=${secret} ctx=${ctx} onDone=${() => setSecret(null)} />` : null}
    <${Create} ctx=${ctx} onCreated=${(r) => {
      setSecret({ id: r.webhook && r.webhook.id, url: r.webhook && r.webhook.url, secret: r.secret });
      if (r.webhook) live.setData((d) => ({ ...(d || {}), webhooks: [r.webhook, ...((d && d.webhooks) || []).filter((x) => x.id !== r.webhook.id)] }));
      live.refresh();
    }} />
    <section class="card card-flush" aria-labelledby="wh-h">
      <header class="card-head card-pad"><h2 id="wh-h">Subscriptions</h2><span class="muted small">${live.data ? `${hooks.length} webhooks` : ''}</span></header>
      <div class="card-pad"><${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} /></div>
      ${!live.data && !live.error ? html`<div class="card-pad"><${Loading} /></div>` : null}
      ${live.data && !hooks.length ? html`<div class="card-pad"><${Empty}>No webhook yet. Subscribe a URL above to have verdicts, scores and backfill news pushed to it.<//></div>` : null}
      ${hooks.length
        ? html`<${TableWrap} label="Webhooks table">
            <table class="table" data-testid="webhooks-table">
              <thead><tr><th scope="col" class="num">ID</th><th scope="col">URL</th><th scope="col">Events</th><th scope="col">State</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
              <tbody>${hooks.map((w) => html`
                <tr key=${'w' + w.id} data-testid=${'webhook-row-' + w.id} class=${w.active ? '' : 'row-muted'}>
                  <td class="num">${w.id}</td>
                  <td class="url"><code>${w.url}</code></td>
                  <td><ul class="chips chips-inline">${(w.events || []).map((e) => html`<li class="chip">${e}</li>`)}</ul></td>
                  <td class="cell-error">${w.active && w.failing
                    ? html`<${Badge} kind="err" testid=${'webhook-state-' + w.id} title="its newest attempted delivery failed; the deliverer keeps retrying">failing<//>
                        <${ErrorText} text=${w.lastError || (w.lastStatus ? 'HTTP ' + w.lastStatus : null)} testid=${'webhook-error-' + w.id} />`
                    : html`<${Badge} kind=${w.active ? 'ok' : w.disabledReason === 'gone' ? 'err' : 'neutral'} testid=${'webhook-state-' + w.id}
                        title=${w.active ? 'deliveries are owed to it' : w.disabledReason === 'gone' ? 'the receiver answered 410 Gone' : 'disabled by an admin'}>${w.active ? 'active' : 'disabled'}<//>`}
                    ${!w.active && w.disabledReason ? html` <span class="muted small">${w.disabledReason === 'gone' ? '410 Gone' : 'by admin'}</span>` : null}</td>
                  <td><${Rel} at=${w.createdAt} now=${now} /></td>
                  <td class="actions">
                    <button type="button" class="btn btn-small btn-quiet" aria-expanded=${open === w.id ? 'true' : 'false'} aria-controls=${'wh-deliveries-' + w.id}
                      onClick=${() => setOpen(open === w.id ? null : w.id)} data-testid=${'webhook-deliveries-' + w.id}>Deliveries</button>
                    <button type="button" class="btn btn-small" disabled=${!!busy} onClick=${() => toggle(w)} data-testid=${'webhook-toggle-' + w.id}>${w.active ? 'Disable' : 'Enable'}</button>
                    ${confirmDelete === w.id
                      ? html`<button type="button" class="btn btn-small btn-danger" disabled=${!!busy} onClick=${() => remove(w)} data-testid=${'webhook-delete-confirm-' + w.id}>Confirm delete</button>
                          <button type="button" class="btn btn-small btn-quiet" onClick=${() => setConfirmDelete(null)}>Cancel</button>`
                      : html`<button type="button" class="btn btn-small btn-quiet btn-danger-quiet" disabled=${!!busy} onClick=${() => setConfirmDelete(w.id)} data-testid=${'webhook-delete-' + w.id}>Delete</button>`}
                  </td>
                </tr>
                ${open === w.id
                  ? html`<tr key=${'d' + w.id} class="row-detail"><td colspan="6" id=${'wh-deliveries-' + w.id}><${Deliveries} ctx=${ctx} id=${w.id} /></td></tr>`
                  : null}`)}
              </tbody>
            </table>
          <//>`
        : null}
    </section>
  </div>`;
}

function Create({ ctx, onCreated }) {
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState(['item.screened']);
  const [err, setErr] = useState(null);
  const [saving, setSaving] = useState(false);
  const urlRef = useRef(null);

  const flip = (e) => setEvents((cur) => (cur.includes(e) ? cur.filter((x) => x !== e) : [...cur, e]));

  const submit = async (ev) => {
    ev.preventDefault();
    let bad = null;
    const u = (urlRef.current ? urlRef.current.value : url).trim();
    if (!/^https?:\/\/[^\s/]+/i.test(u)) bad = { field: 'url', message: 'Enter an http:// or https:// URL.' };
    else if (!events.length) bad = { field: 'events', message: 'Choose at least one event.' };
    if (bad) {
      setErr(bad);
      if (bad.field === 'url') urlRef.current && urlRef.current.focus();
      return;
    }
    setSaving(true);
    setErr(null);
    try {
      const r = await ctx.api('/api/admin/webhooks', { method: 'POST', body: { url: u, events } });
      setUrl('');
      onCreated(r || {});
    } catch (x) {
      setErr({ field: x.field || null, message: x.message });
    } finally {
      setSaving(false);
    }
  };
  const inv = (f) => !!(err && err.field === f);
  return html`<section class="card" aria-labelledby="wh-new">
    <header class="card-head"><h2 id="wh-new">New webhook</h2></header>
    <form class="form form-row" onSubmit=${submit} novalidate data-testid="webhook-form">
      <div class=${'field field-grow' + (inv('url') ? ' field-invalid' : '')}>
        <label for="wh-url">Endpoint URL</label>
        <input id="wh-url" ref=${urlRef} type="url" placeholder="https://example.com/hooks/owed" value=${url} onInput=${(e) => setUrl(e.currentTarget.value)}
          aria-invalid=${inv('url') ? 'true' : 'false'} aria-describedby="wh-url-err" data-testid="webhook-url" />
        ${inv('url') ? html`<p class="field-error" id="wh-url-err" role="alert" data-testid="webhook-error">${err.message}</p>` : null}
      </div>
      <fieldset class=${'field' + (inv('events') ? ' field-invalid' : '')}>
        <legend>Events</legend>
        <div class="checks">
          ${EVENTS.map(([e, what]) => html`<label class="check" title=${what}>
            <input type="checkbox" checked=${events.includes(e)} onChange=${() => flip(e)} data-testid=${'webhook-event-' + e} />
            <code>${e}</code></label>`)}
        </div>
        ${inv('events') ? html`<p class="field-error" role="alert" data-testid="webhook-error">${err.message}</p>` : null}
      </fieldset>
      <div class="field field-actions">
        <button type="submit" class="btn btn-primary" disabled=${saving} data-testid="webhook-create">${saving ? 'Creating…' : 'Create webhook'}</button>
      </div>
      ${err && !['url', 'events'].includes(err.field) ? html`<p class="field-error field-full" role="alert" data-testid="webhook-error">${err.message}</p>` : null}
    </form>
    <p class="hint">Deliveries are signed the Standard Webhooks way (<code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>) with the secret shown once after creation.</p>
  </section>`;
}

function Secret({ s, ctx, onDone }) {
  const box = useRef(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(s.secret);
      ctx.notify('Secret copied to the clipboard.', 'ok');
    } catch {
      const sel = getSelection();
      const r = document.createRange();
      r.selectNodeContents(box.current);
      sel.removeAllRanges();
      sel.addRange(r);
      ctx.notify('Copy failed: the secret is selected, press Ctrl+C.', 'warn');
    }
  };
  return html`<section class="card card-secret" role="alert" aria-labelledby="wh-secret-h" data-testid="webhook-secret-box">
    <header class="card-head"><h2 id="wh-secret-h">Signing secret for webhook ${s.id}</h2></header>
    <p>Store it now: <strong>it is shown only once</strong>. ${s.url ? html`Deliveries to <code>${s.url}</code> are signed with it.` : null}</p>
    <div class="secret">
      <code ref=${box} class="secret-value" data-testid="webhook-secret">${s.secret}</code>
      <button type="button" class="btn btn-small" onClick=${copy} data-testid="webhook-secret-copy">Copy</button>
    </div>
    <div class="row"><button type="button" class="btn btn-quiet" onClick=${onDone} data-testid="webhook-secret-done">I have stored it</button></div>
  </section>`;
}

const DELIVERY_KIND = { delivered: 'ok', pending: 'warn', cancelled: 'neutral' };
const DELIVERY_TITLE = {
  delivered: 'the receiver answered 2xx',
  pending: 'owed: retried on the Standard Webhooks schedule until the receiver answers 2xx',
  cancelled: 'the webhook was disabled (by an admin, or by a 410) while this was owed; redeliver after enabling it',
};
const DELIVERY_STATES = ['pending', 'delivered', 'cancelled'];

/** One attempt's outcome: the HTTP status, or the error when there was no answer. */
function AttemptStatus({ a }) {
  if (a.status == null) return html`<${Badge} kind="err" title=${a.error || ''}>no answer<//>`;
  return html`<${Badge} kind=${a.status >= 200 && a.status < 300 ? 'ok' : 'err'}>${a.status}<//>`;
}

const DELIVERY_PAGE = 20;

function Deliveries({ ctx, id }) {
  const [status, setStatus] = useState('');
  const path = `/api/admin/webhooks/${encodeURIComponent(id)}/deliveries`;
  const live = useLive(ctx, () => ctx.api(path, { query: { status, limit: DELIVERY_PAGE } }), 5000, [id, status]);
  const now = useNow(5000);
  const [busy, setBusy] = useState(null);
  const [open, setOpen] = useState(null); // delivery id whose attempts show
  // Older pages, loaded on request; the live refresh covers the first page.
  const [older, setOlder] = useState({ rows: [], cursor: null, loaded: false, busy: false, key: '' });
  const key = id + ':' + status;
  const more = older.key === key ? older : { rows: [], cursor: null, loaded: false, busy: false, key };
  const first = (live.data && live.data.deliveries) || [];
  const seen = new Set(first.map((d) => d.id));
  const list = first.concat(more.rows.filter((d) => !seen.has(d.id)));
  const cursor = more.loaded ? more.cursor : live.data && live.data.nextCursor;

  const loadOlder = async () => {
    setOlder({ ...more, busy: true });
    try {
      const r = await ctx.api(path, { query: { status, limit: DELIVERY_PAGE, cursor } });
      setOlder({ rows: more.rows.concat((r && r.deliveries) || []), cursor: (r && r.nextCursor) || null, loaded: true, busy: false, key });
    } catch (e) {
      setOlder({ ...more, busy: false });
      ctx.notify('Could not load older deliveries: ' + e.message, 'error');
    }
  };

  const redeliver = async (d) => {
    setBusy(d.id);
    try {
      const r = await ctx.api(`/api/admin/webhooks/deliveries/${encodeURIComponent(d.id)}/redeliver`, { method: 'POST' });
      if (r && r.delivery) {
        const upd = (x) => (x.id === d.id ? { ...x, ...r.delivery } : x);
        live.setData((cur) => cur && { ...cur, deliveries: (cur.deliveries || []).map(upd) });
        setOlder((o) => ({ ...o, rows: o.rows.map(upd) }));
      }
      ctx.notify(`Delivery ${d.id} is owed again: it is attempted now.`, 'ok');
      live.refresh();
    } catch (e) {
      ctx.notify(`Could not redeliver ${d.id}: ${e.message}`, 'error');
    } finally {
      setBusy(null);
    }
  };

  return html`<div class="deliveries" data-testid=${'webhook-deliveries-list-' + id}>
    <div class="deliveries-head">
      <h3 class="small-h">Deliveries of webhook ${id}</h3>
      <div class="field field-inline">
        <label for=${'wh-dstatus-' + id}>Status</label>
        <select id=${'wh-dstatus-' + id} value=${status} onChange=${(e) => setStatus(e.currentTarget.value)} data-testid=${'delivery-filter-' + id}>
          <option value="">any</option>
          ${DELIVERY_STATES.map((s) => html`<option value=${s}>${s}</option>`)}
        </select>
      </div>
    </div>
    <${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} />
    ${!live.data && !live.error ? html`<${Loading} />` : null}
    ${live.data && !list.length ? html`<${Empty}>${status ? `No ${status} delivery.` : 'No delivery yet.'}<//>` : null}
    ${list.length
      ? html`<${TableWrap} label=${'Deliveries of webhook ' + id}><table class="table table-compact">
          <thead><tr><th scope="col" class="num">ID</th><th scope="col">Event</th><th scope="col">Status</th><th scope="col" class="num">Attempts</th>
            <th scope="col" class="num">Last HTTP</th><th scope="col">Last error</th><th scope="col">Next attempt</th><th scope="col">Delivered</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>${list.map((d) => html`<tr key=${'d' + d.id} data-testid=${'delivery-row-' + d.id}>
            <td class="num">${d.id}</td>
            <td><code>${d.event}</code></td>
            <td><${Badge} kind=${DELIVERY_KIND[d.status] || 'neutral'} title=${DELIVERY_TITLE[d.status]}>${d.status}<//></td>
            <td class="num">${d.attempts}</td>
            <td class="num">${d.lastStatus ?? '—'}</td>
            <td class="cell-error">${d.lastError ? html`<span class="err-text" title=${d.lastError}>${d.lastError}</span>` : html`<span class="muted">—</span>`}</td>
            <td>${d.nextAttemptAt ? html`<${Rel} at=${d.nextAttemptAt} now=${now} />` : html`<span class="muted">—</span>`}</td>
            <td>${d.deliveredAt ? html`<${Rel} at=${d.deliveredAt} now=${now} />` : html`<span class="muted">—</span>`}</td>
            <td class="actions">
              <button type="button" class="btn btn-small btn-quiet" aria-expanded=${open === d.id ? 'true' : 'false'} aria-controls=${'wh-attempts-' + d.id}
                onClick=${() => setOpen(open === d.id ? null : d.id)} data-testid=${'delivery-attempts-' + d.id}>Attempts</button>
              <button type="button" class="btn btn-small" disabled=${busy === d.id} onClick=${() => redeliver(d)} data-testid=${'delivery-redeliver-' + d.id}>Redeliver</button>
            </td>
          </tr>
          ${open === d.id
            ? html`<tr key=${'a' + d.id} class="row-detail"><td colspan="9" id=${'wh-attempts-' + d.id}><${Attempts} ctx=${ctx} d=${d} /></td></tr>`
            : null}`)}</tbody>
        </table><//>`
      : null}
    <${MoreButton} cursor=${cursor} busy=${more.busy} onClick=${loadOlder} label="Older deliveries" testid=${'delivery-older-' + id} />
  </div>`;
}

/** Every attempt of one delivery, and its payload: GET /api/admin/webhooks/deliveries/{id}. */
function Attempts({ ctx, d }) {
  const live = useLive(ctx, () => ctx.api(`/api/admin/webhooks/deliveries/${encodeURIComponent(d.id)}`), 5000, [d.id, d.attempts]);
  const full = (live.data && live.data.delivery) || null;
  // The list carries the latest attempts; the delivery's own answer has them all.
  const log = ((full && full.attemptLog) || d.attemptLog || []).slice().sort((a, b) => b.attempt - a.attempt);
  return html`<div class="attempts">
    <p class="small muted">Message <code>${d.messageId}</code> · the same <code>webhook-id</code> on every attempt · created <${Rel} at=${d.createdAt} /></p>
    <${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} />
    ${log.length
      ? html`<${TableWrap} label=${'Attempts of delivery ' + d.id}><table class="table table-compact" data-testid=${'delivery-attempts-table-' + d.id}>
          <thead><tr><th scope="col" class="num">#</th><th scope="col">When</th><th scope="col">Answer</th><th scope="col" class="num">Latency</th><th scope="col">Error</th></tr></thead>
          <tbody>${log.map((a) => html`<tr key=${a.attempt}>
            <td class="num">${a.attempt}</td>
            <td><${Rel} at=${a.at} /> <span class="muted small">${fmt.time(a.at)}</span></td>
            <td><${AttemptStatus} a=${a} /></td>
            <td class="num">${fmt.duration(a.latencyMs)}</td>
            <td class="cell-error">${a.error ? html`<span class="err-text">${a.error}</span>` : html`<span class="muted">—</span>`}</td>
          </tr>`)}</tbody>
        </table><//>`
      : html`<${Empty}>Not attempted yet.<//>`}
    ${full && full.payload
      ? html`<details class="payload">
          <summary>Payload</summary>
          <pre class="code" data-testid=${'delivery-payload-' + d.id}>${JSON.stringify(full.payload, null, 2)}</pre>
        </details>`
      : null}
  </div>`;
}

export default {
  id: 'webhooks',
  title: 'Webhooks',
  mount(el, ctx) {
    render(html`<${Webhooks} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
