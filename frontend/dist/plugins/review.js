// Review: the moderators' queue, one entry at a time, built for speed. Each entry is
// an item the model was unsure of (its verdict below the review band) or an author's appeal of
// a block, with the item's whole content, the model's suggestion, the author's history and
// the appeal's note (and the blocker's). Showing an entry claims it for 5 minutes (POST
// …/claim), so two moderators never decide the same entry; an entry another moderator holds
// says so and cannot be decided here. The panel opens at the oldest entry nobody else holds.
// Keys: A allow, B block, S skip (releases the claim; not shown again this visit), N next, U
// undo the last decision while its toast offers Undo (an overturn with the note "undo").
// Data: GET /api/admin/review every 10 s (claim: mine or unclaimed to filter); POST and
// DELETE /api/admin/review/{kind}/{id}/claim; POST /api/admin/items/{kind}/{id}/verdict.

import { html, render, useState, useEffect, useRef } from '../vendor/preact-htm.js';
import { fmt } from '../lib/fmt.js';
import { useLive, useNow, Rel, Badge, LoadError, Loading, Empty, ItemPageLink } from '../lib/ui.js';

const REASONS = { unsure: 'model unsure', appeal: 'appeal' };
const UNDO_MS = 8000;
const keyOf = (e) => e.kind + ':' + e.id;

function Review({ ctx }) {
  const [reason, setReason] = useState('');
  const [claim, setClaim] = useState('');
  const live = useLive(ctx, () => ctx.api('/api/admin/review', { query: { limit: 100, reason, claim } }), 10000, [reason, claim]);
  const now = useNow(5000);
  const [skipped, setSkipped] = useState(() => new Set());
  const [done, setDone] = useState(() => new Set());
  const [at, setAt] = useState(null); // key of the entry shown
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState('');
  const [claims, setClaims] = useState({}); // key → claim answered by our own claim, or {error}
  const claiming = useRef({}); // key → our claim request, answered or not (a skip releases after it)
  const noteRef = useRef(null);

  const all = (live.data && live.data.entries) || [];
  const queue = all.filter((e) => !skipped.has(keyOf(e)) && !done.has(keyOf(e)));
  let i = queue.findIndex((e) => keyOf(e) === at);
  if (i < 0) i = Math.max(0, queue.findIndex((e) => !e.claim || e.claim.mine)); // the oldest nobody else holds
  const entry = queue[i] || null;
  const counts = (live.data && live.data.counts) || { unsure: 0, appeal: 0 };

  // Show an entry: claim it, unless another moderator holds it.
  useEffect(() => {
    if (!entry) return;
    const k = keyOf(entry);
    if (at !== k) setAt(k);
    setNote('');
    delete claiming.current[k];
    if (entry.claim && !entry.claim.mine) return;
    // The blocker may not hear the appeal: a claim would only keep it from who may.
    if (entry.reason === 'appeal' && entry.blockedBy != null && ctx.user && ctx.user.id === entry.blockedBy) return;
    let alive = true;
    const claim = ctx.api(`/api/admin/review/${entry.kind}/${entry.id}/claim`, { method: 'POST' });
    claiming.current[k] = claim;
    claim.then(
      (r) => alive && setClaims((c) => ({ ...c, [k]: r.claim })),
      (x) => alive && setClaims((c) => ({ ...c, [k]: { error: x.message } }))
    );
    return () => {
      alive = false;
    };
  }, [entry && keyOf(entry)]);

  const k = entry && keyOf(entry);
  const own = entry && claims[k];
  const heldBy = entry && ((own && own.error) ? { text: own.error } : entry.claim && !entry.claim.mine ? { text: `claimed by ${entry.claim.adminName || 'admin #' + entry.claim.adminId}`, until: entry.claim.until } : null);
  const sameModerator = entry && entry.reason === 'appeal' && entry.blockedBy != null && ctx.user && ctx.user.id === entry.blockedBy;
  const canDecide = entry && !heldBy && !sameModerator && !busy;

  const move = (step) => {
    if (!queue.length) return;
    const next = queue[(i + step + queue.length) % queue.length];
    setAt(keyOf(next));
  };
  const skip = () => {
    if (!entry) return;
    const next = queue[i + 1] || queue[0];
    // Release our claim once its request is answered: a skip right after the entry showed
    // can come before the answer, and a release that overtook the claim would leave it held.
    const claim = claiming.current[k];
    delete claiming.current[k];
    if (claim) {
      claim.then(
        () => ctx.api(`/api/admin/review/${entry.kind}/${entry.id}/claim`, { method: 'DELETE' }).catch((x) => ctx.notify('Could not release the claim: ' + x.message, 'error')),
        () => {} // never claimed: nothing to release
      );
    }
    setSkipped((s) => new Set(s).add(k));
    setAt(next && keyOf(next) !== k ? keyOf(next) : null);
  };
  const decide = async (verdict) => {
    if (!canDecide) return;
    setBusy(true);
    try {
      const body = { verdict };
      if (note.trim()) body.note = note.trim();
      await ctx.api(`/api/admin/items/${entry.kind}/${entry.id}/verdict`, { method: 'POST', body });
      offerUndo(entry, verdict);
      const next = queue[i + 1] || null;
      setDone((d) => new Set(d).add(k));
      setAt(next ? keyOf(next) : null);
      live.refresh();
    } catch (x) {
      ctx.notify(x.message, 'error');
      live.refresh();
    } finally {
      setBusy(false);
    }
  };

  // Undo: for a few seconds after A or B, the toast's Undo button (or U) overturns the
  // decision, by the same moderator, with the note "undo". The focus then goes back to the queue.
  const undoable = useRef(null); // {kind, id, verdict, until}
  const offerUndo = (e, verdict) => {
    const it = { kind: e.kind, id: e.id, verdict, until: Date.now() + UNDO_MS };
    undoable.current = it;
    it.dismiss = ctx.notify(`${verdict === 'allow' ? 'Allowed' : 'Blocked'} ${e.kind} #${e.id}.`, 'ok', {
      ms: UNDO_MS,
      action: { label: 'Undo', testid: 'review-undo', run: () => undo(it) },
    });
  };
  const undo = async (it) => {
    if (!it || undoable.current !== it) return;
    undoable.current = null;
    it.dismiss && it.dismiss();
    const back = it.verdict === 'allow' ? 'block' : 'allow';
    try {
      await ctx.api(`/api/admin/items/${it.kind}/${it.id}/verdict`, { method: 'POST', body: { verdict: back, note: 'undo', overturn: true } });
      ctx.notify(`Undone: ${it.kind} #${it.id} is ${back === 'allow' ? 'allowed' : 'blocked'} now (an overturn with the note “undo”).`, 'ok');
    } catch (x) {
      ctx.notify(`Could not undo ${it.kind} #${it.id}: ${x.message}`, 'error');
    }
    live.refresh();
    requestAnimationFrame(() => {
      const b = document.querySelector('[data-testid="review-allow"]:not([disabled])');
      (b || document.getElementById('panel-review') || document.querySelector('.panel:not([hidden])'))?.focus();
    });
  };

  // The keyboard: A allow, B block, S skip, N next, U undo the last decision (not while typing a note).
  const keys = useRef(null);
  keys.current = { decide, skip, move, undo: () => undoable.current && Date.now() < undoable.current.until && undo(undoable.current) };
  useEffect(() => {
    const onKey = (e) => {
      if (!ctx.isActive() || e.ctrlKey || e.metaKey || e.altKey) return;
      const t = e.target;
      if (t && (t.tagName === 'TEXTAREA' || t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.isContentEditable)) return;
      if (document.querySelector('dialog[open]')) return;
      const act = { a: () => keys.current.decide('allow'), b: () => keys.current.decide('block'), s: () => keys.current.skip(), n: () => keys.current.move(1), u: () => keys.current.undo() }[e.key.toLowerCase()];
      if (act) {
        e.preventDefault();
        act();
      }
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);

  return html`<div class="stack review">
    <section class="card card-flush" aria-labelledby="rev-h">
      <header class="card-head card-pad">
        <h2 id="rev-h">Review queue</h2>
        <span class="muted small" data-testid="review-counts">${fmt.number(counts.unsure)} unsure · ${fmt.number(counts.appeal)} appealed</span>
        <div class="field field-inline">
          <label for="rev-reason">Show</label>
          <select id="rev-reason" value=${reason} data-testid="review-reason" onChange=${(e) => setReason(e.currentTarget.value)}>
            <option value="">all entries</option>
            <option value="unsure">unsure verdicts</option>
            <option value="appeal">appeals</option>
          </select>
        </div>
        <div class="field field-inline">
          <label for="rev-claim">Claims</label>
          <select id="rev-claim" value=${claim} data-testid="review-claim" onChange=${(e) => setClaim(e.currentTarget.value)}>
            <option value="">any</option>
            <option value="mine">claimed by me</option>
            <option value="unclaimed">unclaimed</option>
          </select>
        </div>
      </header>
      <div class="card-pad"><${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} /></div>
      ${!live.data && !live.error ? html`<div class="card-pad"><${Loading} /></div>` : null}
      ${live.data && !entry
        ? html`<div class="card-pad" data-testid="review-empty"><${Empty}>${skipped.size ? `Nothing left but the ${skipped.size} you skipped: reload to see them again.` : 'The queue is clear.'}<//></div>`
        : null}
      ${entry ? html`<${Entry} ctx=${ctx} entry=${entry} now=${now} pos=${i + 1} of=${queue.length} heldBy=${heldBy} sameModerator=${sameModerator} />` : null}
      ${entry
        ? html`<div class="card-pad review-actions">
            <label for="rev-note" class="small">Note <span class="muted">(optional, kept with the decision)</span></label>
            <textarea id="rev-note" ref=${noteRef} rows="2" maxlength="500" value=${note} data-testid="review-note"
              onInput=${(e) => setNote(e.currentTarget.value)}
              onKeyDown=${(e) => e.key === 'Escape' && e.currentTarget.blur()}></textarea>
            <div class="row">
              <button type="button" class="btn btn-primary" disabled=${!canDecide} onClick=${() => decide('allow')} data-testid="review-allow"
                aria-keyshortcuts="A">Allow <kbd>A</kbd></button>
              <button type="button" class="btn btn-danger" disabled=${!canDecide} onClick=${() => decide('block')} data-testid="review-block"
                aria-keyshortcuts="B">Block <kbd>B</kbd></button>
              <button type="button" class="btn btn-quiet" onClick=${skip} data-testid="review-skip" aria-keyshortcuts="S">Skip <kbd>S</kbd></button>
              <button type="button" class="btn btn-quiet" onClick=${() => move(1)} disabled=${queue.length < 2} data-testid="review-next"
                aria-keyshortcuts="N">Next <kbd>N</kbd></button>
            </div>
          </div>`
        : null}
    </section>
    <p class="muted small">Deciding here records the verdict as yours, like a verdict by hand on a job; for a few seconds its toast offers Undo (or press U), which overturns it with the note “undo”. An appeal of a block decided by hand is heard by another moderator. Skipping releases your claim: the entry is free for everyone else at once.</p>
  </div>`;
}

function Entry({ ctx, entry: e, now, pos, of, heldBy, sameModerator }) {
  const conf = e.confidence == null ? null : Math.round(e.confidence * 100);
  return html`<article class="card-pad review-entry" data-testid=${'review-entry-' + e.kind + '-' + e.id} aria-labelledby="rev-item">
    <div class="row">
      <h3 id="rev-item" class="review-title">${e.kind} #${e.id}</h3>
      <${ItemPageLink} ctx=${ctx} kind=${e.kind} id=${e.id} testid="review-item-page"><span class="small">its history</span><//>
      <${Badge} kind=${e.reason === 'appeal' ? 'warn' : 'info'} testid="review-reason-badge">${REASONS[e.reason] || e.reason}<//>
      <span class="muted small">${pos} of ${of} · waiting since <${Rel} at=${e.enteredAt} now=${now} /></span>
    </div>
    ${heldBy
      ? html`<p class="note note-warn" role="status" data-testid="review-claimed">This entry is ${heldBy.text}${heldBy.until ? html` until <${Rel} at=${heldBy.until} now=${now} />` : ''}: it cannot be decided here.</p>`
      : null}
    ${sameModerator ? html`<p class="note note-warn" role="status" data-testid="review-same">You blocked this item by hand: another moderator must hear its appeal.</p>` : null}
    <p class="review-suggestion" data-testid="review-suggestion">
      ${e.reason === 'appeal'
        ? html`Blocked ${e.blockedBy != null ? html`by hand (admin #${e.blockedBy})` : html`by the model${conf != null ? ` at ${conf}% confidence` : ''}`}.`
        : html`The model suggests <strong>${e.suggestion}</strong>${conf != null ? ` at ${conf}% confidence` : ''}.`}
    </p>
    ${e.blockNote ? html`<blockquote class="review-note" data-testid="review-block-note"><span class="muted small">The blocker's note:</span> ${e.blockNote}</blockquote>` : null}
    ${e.note ? html`<blockquote class="review-note" data-testid="review-appeal-note"><span class="muted small">The author's note:</span> ${e.note}</blockquote>` : null}
    <div class="review-content" data-testid="review-content">
      ${e.content.title ? html`<div class="strong">${e.content.title}</div>` : null}
      <pre class="review-text" tabindex="0" aria-label="The item's content">${e.content.text}</pre>
    </div>
    <p class="small" data-testid="review-author">
      By <span class="strong">${e.author.name || 'user #' + e.author.id}</span> <span class="muted num">#${e.author.id}</span>${': '}${fmt.number(e.author.allowed)} allowed · ${fmt.number(e.author.blocked)} blocked
    </p>
  </article>`;
}

export default {
  id: 'review',
  title: 'Review',
  mount(el, ctx) {
    render(html`<${Review} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
