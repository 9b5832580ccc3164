// Items: one item's whole history at /admin/items/{kind}/{id} — its content and author, the
// verdict it has now and every verdict before it (the model's, by hand, overturned) with who
// and why, every screen and score attempt with its error, the appeal and the review entry with
// their claims, the audit entries on it and the webhook deliveries it caused. The verdict is
// overturned here with a note of its own (required: the server refuses an overturn without
// one, and the refusal shows at the note). /admin/items alone is the search by kind and id.
// Data: GET /api/admin/items/{kind}/{id} every 10 s; POST /api/admin/items/{kind}/{id}/verdict.

import { html, render, useState, useEffect, useRef } from '../vendor/preact-htm.js';
import { useLive, useNow, Rel, Badge, WhyBadge, LoadError, Loading, Empty, TableWrap, ErrorText, Confirm, AuditValue, AttemptHeads, AttemptCells } from '../lib/ui.js';

const KINDS = ['revision', 'comment', 'pitch'];

function where(ctx) {
  const [kind, id] = ctx.path();
  return KINDS.includes(kind) && /^\d+$/.test(id || '') ? { kind, id } : null;
}

function Items({ ctx }) {
  const [at, setAt] = useState(() => where(ctx));
  useEffect(() => ctx.onParams && ctx.onParams(() => setAt(where(ctx))), []);
  const open = (kind, id) => ctx.navigate('items', `/${kind}/${id}`);
  return html`<div class="stack item-page">
    <${Find} at=${at} onFind=${open} />
    ${at ? html`<${Item} key=${at.kind + at.id} ctx=${ctx} kind=${at.kind} id=${at.id} />` : html`<p class="muted small" data-testid="item-none">Pick a kind and an id to see an item's whole history: every attempt, verdict, appeal, audit entry and webhook delivery.</p>`}
  </div>`;
}

/** The search by item: its kind and id. */
function Find({ at, onFind }) {
  const [kind, setKind] = useState(at ? at.kind : 'revision');
  const [id, setId] = useState(at ? at.id : '');
  const [err, setErr] = useState(null);
  useEffect(() => {
    if (at) {
      setKind(at.kind);
      setId(at.id);
    }
  }, [at && at.kind, at && at.id]);
  const submit = (e) => {
    e.preventDefault();
    const v = String(id).trim().replace(/^#/, '');
    if (!/^\d+$/.test(v)) {
      setErr('Enter the item\u2019s id, a number.');
      return;
    }
    setErr(null);
    onFind(kind, v);
  };
  return html`<form class="card filters" onSubmit=${submit} aria-label="Find an item" data-testid="item-find" novalidate>
    <div class="field">
      <label for="if-kind">Kind</label>
      <select id="if-kind" value=${kind} onChange=${(e) => setKind(e.currentTarget.value)} data-testid="item-find-kind">
        ${KINDS.map((k) => html`<option value=${k}>${k}</option>`)}
      </select>
    </div>
    <div class=${'field field-narrow' + (err ? ' field-invalid' : '')}>
      <label for="if-id">Id</label>
      <input id="if-id" type="search" inputmode="numeric" autocomplete="off" value=${id} onInput=${(e) => setId(e.currentTarget.value)}
        aria-invalid=${err ? 'true' : 'false'} aria-describedby="if-id-error" data-testid="item-find-id" />
    </div>
    <div class="field field-actions">
      <button type="submit" class="btn btn-primary" data-testid="item-find-go">Show the item</button>
    </div>
    <p id="if-id-error" class="field-error" role="alert" hidden=${!err}>${err || ''}</p>
  </form>`;
}

function Item({ ctx, kind, id }) {
  const [missing, setMissing] = useState(false);
  const live = useLive(
    ctx,
    async () => {
      try {
        const r = await ctx.api(`/api/admin/items/${kind}/${id}`);
        setMissing(false);
        return r;
      } catch (e) {
        if (e.status === 404) setMissing(true);
        throw e;
      }
    },
    10000,
    [kind, id]
  );
  const now = useNow(5000);
  const head = useRef(null);
  useEffect(() => {
    document.title = `${kind} #${id} · owed admin`;
  }, [kind, id]);
  const d = live.data;
  if (missing) return html`<p class="note note-info" role="status" data-testid="item-missing">There is no ${kind} #${id}: it was never made, or it was deleted.</p>`;
  if (!d) return live.error ? html`<${LoadError} error=${live.error} retry=${live.refresh} />` : html`<${Loading} />`;
  return html`<article class="stack" aria-labelledby="item-h" data-testid="item-page">
    <section class="card">
      <header class="card-head">
        <h2 id="item-h" tabindex="-1" ref=${head} data-testid="item-heading"><span class="item-kind">${kind}</span> #${id}${d.title ? html` <q class="item-title">${d.title}</q>` : null}</h2>
        <span data-testid="item-verdict">${d.verdict
          ? html`<${Badge} kind=${d.verdict === 'allow' ? 'ok' : 'err'}>${d.verdict === 'allow' ? 'allowed' : 'blocked'}<//>`
          : html`<${Badge} kind="warn">no verdict yet<//>`}</span>
      </header>
      <${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} />
      <dl class="kv">
        <dt>Author</dt><dd data-testid="item-author"><span class="strong">${d.author.name || 'user #' + d.author.id}</span> <span class="muted small num">#${d.author.id}</span>
          ${' · '}<a href=${'/admin/events?userId=' + d.author.id} onClick=${nav(ctx, 'events', '?userId=' + d.author.id)}>their events</a></dd>
        <dt>Content</dt><dd data-testid="item-content"><pre class="item-content">${d.content}</pre></dd>
        ${d.jobs.length
          ? html`<dt>Owed</dt><dd data-testid="item-jobs">${d.jobs.map((j) => html`<span class="item-job">
              <a href=${'/admin/jobs?job=' + j.id} onClick=${nav(ctx, 'jobs', '?job=' + j.id)}>${j.task} job ${j.id}</a> <${WhyBadge} why=${j.why} />${' '}</span>`)}</dd>`
          : null}
      </dl>
      ${d.verdict ? html`<${Overturn} ctx=${ctx} kind=${kind} id=${id} verdict=${d.verdict} head=${head} onDone=${live.refresh} />` : null}
    </section>
    <${Verdicts} list=${d.verdicts} now=${now} />
    <${Appeal} review=${d.review} appeal=${d.appeal} now=${now} />
    <${Attempts} events=${d.events} now=${now} />
    <${AuditEntries} ctx=${ctx} entries=${d.audit} target=${kind + ':' + id} now=${now} />
    <${Deliveries} list=${d.deliveries} now=${now} />
  </article>`;
}

/** A link to another panel that stays in the console. */
function nav(ctx, panel, search) {
  return (e) => {
    if (e.metaKey || e.ctrlKey || e.shiftKey || e.button === 1) return;
    e.preventDefault();
    ctx.navigate(panel, search);
  };
}

/**
 * Overturn: the other verdict, with a note of its own, confirmed. The server's refusal (no
 * note, too long) shows at the note, which takes the focus; Esc gives the focus back to the
 * button; a done overturn puts it on the item's heading, whose verdict changed.
 */
function Overturn({ ctx, kind, id, verdict, head, onDone }) {
  const [note, setNote] = useState('');
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState(null);
  const field = useRef(null);
  const other = verdict === 'allow' ? 'block' : 'allow';
  const focus = (sel) => requestAnimationFrame(() => document.querySelector(sel)?.focus());
  const cancel = () => {
    setAsking(false);
    focus('[data-testid="item-overturn"]');
  };
  const send = async () => {
    setBusy(true);
    try {
      await ctx.api(`/api/admin/items/${kind}/${id}/verdict`, { method: 'POST', body: { verdict: other, note: note.trim() || null, overturn: true } });
      ctx.notify(`Overturned: the ${kind} #${id} is ${other === 'allow' ? 'allowed' : 'blocked'} now.`, 'ok');
      setNote('');
      setErr(null);
      setAsking(false);
      onDone();
      requestAnimationFrame(() => head.current && head.current.focus());
    } catch (e) {
      setErr({ message: e.message, field: e.field });
      setAsking(false);
      if (e.field === 'note') requestAnimationFrame(() => field.current && field.current.focus());
      else focus('[data-testid="item-overturn"]');
    }
    setBusy(false);
  };
  const atNote = err && err.field === 'note';
  return html`<div class="overturn" data-testid="item-overturn-box">
    <h3>Overturn</h3>
    <div class=${'field' + (atNote ? ' field-invalid' : '')}>
      <label for="item-overturn-note">Why ${other} it instead (required; moderators and webhooks see it, the author does not)</label>
      <input id="item-overturn-note" ref=${field} type="text" maxlength="500" value=${note} aria-invalid=${atNote ? 'true' : 'false'} aria-describedby="item-overturn-error"
        onInput=${(e) => setNote(e.currentTarget.value)} data-testid="item-overturn-note" />
    </div>
    <p id="item-overturn-error" class="field-error" role="alert" data-testid="item-overturn-error" hidden=${!err}>${err ? err.message : ''}</p>
    ${asking
      ? html`<${Confirm} text=${`Overturn: ${other} this ${kind} instead${note.trim() ? `, with the note “${note.trim()}”` : ', with no note'}? Its webhook is sent again.`}
          confirmLabel=${busy ? 'Overturning…' : `Yes, ${other}`} danger=${other === 'block'} busy=${busy} onConfirm=${send} onCancel=${cancel} testid="item-overturn-confirm" />`
      : html`<button type="button" class="btn btn-small" onClick=${() => setAsking(true)} data-testid="item-overturn">Overturn (${other})…</button>`}
  </div>`;
}

const OUTCOME = { allow: 'the model', block: 'the model', decided: 'by hand', overturned: 'overturned' };

function Verdicts({ list, now }) {
  return html`<section class="card card-flush" aria-labelledby="item-verdicts-h">
    <header class="card-head card-pad"><h2 id="item-verdicts-h">Verdicts</h2><span class="muted small">oldest first</span></header>
    ${!list.length ? html`<div class="card-pad"><${Empty}>No verdict yet.<//></div>` : null}
    ${list.length
      ? html`<${TableWrap} label="Verdicts">
          <table class="table table-compact table-wrapping" data-testid="item-verdicts">
            <thead><tr><th scope="col">When</th><th scope="col">Verdict</th><th scope="col">How</th><th scope="col">Who</th><th scope="col">Why</th><th scope="col" class="num">Confidence</th></tr></thead>
            <tbody>${list.map((v, i) => html`<tr key=${i} data-testid=${'item-verdict-' + i}>
              <td><${Rel} at=${v.at} now=${now} /></td>
              <td><${Badge} kind=${v.verdict === 'allow' ? 'ok' : 'err'}>${v.verdict}<//></td>
              <td>${OUTCOME[v.outcome] || v.outcome}</td>
              <td>${v.adminId != null ? html`${v.adminName || 'admin'} <span class="muted small num">#${v.adminId}</span>` : html`<span class="muted">the model</span>`}</td>
              <td class="c-wrap">${v.note ? html`<q>${v.note}</q>` : html`<span class="muted">—</span>`}</td>
              <td class="num">${v.confidence == null ? '—' : Number(v.confidence).toFixed(2)}</td>
            </tr>`)}</tbody>
          </table>
        <//>`
      : null}
  </section>`;
}

function Who({ id, name }) {
  if (id == null) return html`<span class="muted">—</span>`;
  return html`${name || 'admin'} <span class="muted small num">#${id}</span>`;
}

function ReviewFacts({ r, what, now, testid }) {
  const decided = r.decidedAt
    ? html`${r.outcome || 'decided'} by <${Who} id=${r.decidedBy} name=${r.decidedByName} />, <${Rel} at=${r.decidedAt} now=${now} />${r.decidedByCreator
        ? html` <span class="muted small">(their account was made by ${r.decidedByCreator.adminName || 'admin #' + r.decidedByCreator.adminId})</span>`
        : null}`
    : html`<span class="muted">not yet</span>`;
  return html`<div data-testid=${testid}>
    <h3>${what}</h3>
    <dl class="kv">
      <dt>Entered</dt><dd><${Rel} at=${r.enteredAt} now=${now} /></dd>
      ${r.suggestion ? html`<dt>${r.blockedBy != null || what === 'Appeal' ? 'Appealed' : 'The model said'}</dt><dd>${r.suggestion}${r.confidence != null ? ` at ${Math.round(r.confidence * 100)}% confidence` : ''}</dd>` : null}
      ${r.blockedBy != null ? html`<dt>Blocked by</dt><dd><${Who} id=${r.blockedBy} name=${r.blockedByName} /></dd>` : null}
      ${r.note ? html`<dt>The author's note</dt><dd><q>${r.note}</q></dd>` : null}
      <dt>Claim</dt><dd>${r.claim ? html`${r.claim.mine ? 'yours' : r.claim.adminName || 'admin #' + r.claim.adminId} until <${Rel} at=${r.claim.until} now=${now} />` : html`<span class="muted">none</span>`}</dd>
      <dt>Decided</dt><dd>${decided}</dd>
    </dl>
  </div>`;
}

function Appeal({ review, appeal, now }) {
  if (!review && !appeal) return null;
  return html`<section class="card" aria-labelledby="item-review-h">
    <header class="card-head"><h2 id="item-review-h">Review and appeal</h2></header>
    ${review ? html`<${ReviewFacts} r=${review} what="Review (the model was unsure)" now=${now} testid="item-review" />` : null}
    ${appeal ? html`<${ReviewFacts} r=${appeal} what="Appeal" now=${now} testid="item-appeal" />` : null}
  </section>`;
}

function Attempts({ events, now }) {
  return html`<section class="card card-flush" aria-labelledby="item-events-h">
    <header class="card-head card-pad"><h2 id="item-events-h">Attempts and decisions</h2><span class="muted small">every screen and score, newest first</span></header>
    ${!events.length ? html`<div class="card-pad"><${Empty}>No attempt yet.<//></div>` : null}
    ${events.length
      ? html`<${TableWrap} label="Attempts and decisions">
          <table class="table table-compact table-attempts" data-testid="item-events">
            <thead><tr><th scope="col">When</th><th scope="col">Task</th><${AttemptHeads} /></tr></thead>
            <tbody>${events.map((e) => html`<tr key=${e.id} data-testid=${'item-event-' + e.id}>
              <td data-label="when"><${Rel} at=${e.at} now=${now} /></td>
              <td data-label="task">${e.event}</td>
              <${AttemptCells} e=${e} />
            </tr>`)}</tbody>
          </table>
        <//>`
      : null}
  </section>`;
}

function AuditEntries({ ctx, entries, target, now }) {
  return html`<section class="card card-flush" aria-labelledby="item-audit-h">
    <header class="card-head card-pad"><h2 id="item-audit-h">Audit entries</h2>
      <a class="small" href=${'/admin/audit?target=' + encodeURIComponent(target)} onClick=${nav(ctx, 'audit', '?target=' + encodeURIComponent(target))} data-testid="item-audit-link">In the audit trail</a></header>
    ${!entries.length ? html`<div class="card-pad"><${Empty}>No operator action on it.<//></div>` : null}
    ${entries.length
      ? html`<${TableWrap} label="Audit entries">
          <table class="table table-compact table-wrapping" data-testid="item-audit">
            <thead><tr><th scope="col">When</th><th scope="col">Admin</th><th scope="col">Action</th><th scope="col">Before</th><th scope="col">After</th></tr></thead>
            <tbody>${entries.map((e) => html`<tr key=${e.id} data-testid=${'item-audit-' + e.id}>
              <td><${Rel} at=${e.at} now=${now} /></td>
              <td>${e.adminName || html`<span class="muted">owed</span>`}</td>
              <td><${Badge} kind="accent">${e.action}<//></td>
              <td class="c-wrap"><${AuditValue} v=${e.before} /></td>
              <td class="c-wrap"><${AuditValue} v=${e.after} /></td>
            </tr>`)}</tbody>
          </table>
        <//>`
      : null}
  </section>`;
}

const DELIVERY_KIND = { delivered: 'ok', pending: 'warn', cancelled: 'neutral', dead: 'err' };

function Deliveries({ list, now }) {
  return html`<section class="card card-flush" aria-labelledby="item-deliveries-h">
    <header class="card-head card-pad"><h2 id="item-deliveries-h">Webhook deliveries</h2><span class="muted small">what its events sent, newest first</span></header>
    ${!list.length ? html`<div class="card-pad"><${Empty}>None: no webhook wanted its events.<//></div>` : null}
    ${list.length
      ? html`<${TableWrap} label="Webhook deliveries">
          <table class="table table-compact table-wrapping" data-testid="item-deliveries">
            <thead><tr><th scope="col">Made</th><th scope="col">Event</th><th scope="col" class="num">Webhook</th><th scope="col">Status</th><th scope="col" class="num">Attempts</th><th scope="col">Last answer</th></tr></thead>
            <tbody>${list.map((d) => html`<tr key=${d.id} data-testid=${'item-delivery-' + d.id}>
              <td><${Rel} at=${d.createdAt} now=${now} /></td>
              <td><code>${d.event}</code></td>
              <td class="num">#${d.webhookId}</td>
              <td><${Badge} kind=${DELIVERY_KIND[d.status] || 'neutral'}>${d.status}<//>${d.nextAttemptAt ? html` <span class="small muted">next <${Rel} at=${d.nextAttemptAt} now=${now} /></span>` : null}</td>
              <td class="num">${d.attempts}</td>
              <td class="c-wrap">${d.lastStatus != null ? html`<span class="num">${d.lastStatus}</span> ` : null}${d.lastError ? html`<${ErrorText} text=${d.lastError} />` : d.lastStatus == null ? html`<span class="muted">—</span>` : null}</td>
            </tr>`)}</tbody>
          </table>
        <//>`
      : null}
  </section>`;
}

export default {
  id: 'items',
  title: 'Items',
  mount(el, ctx) {
    render(html`<${Items} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
