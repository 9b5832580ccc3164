// Budgets: model calls each author spent today against their daily limit, when it resets,
// and an inline editor for the limit; then every user (authors, bots, admins) with "Rotate
// token" (the new token shown once, in a modal dialog) and "Disable"/"Enable".
// Data: GET /api/admin/budgets every 5 s; PUT /api/admin/users/{id}/budget {dailyLimit};
// GET /api/admin/users every 10 s; POST /api/admin/users/{id}/token; PATCH /api/admin/users/{id}
// {disabled}.

import { html, render, useState, useEffect, useRef } from '../vendor/preact-htm.js';
import { fmt } from '../lib/fmt.js';
import { useLive, useNow, Rel, Badge, LoadError, Loading, Empty, TableWrap } from '../lib/ui.js';

function Budgets({ ctx }) {
  const live = useLive(ctx, () => ctx.api('/api/admin/budgets'), 5000);
  const now = useNow(10000);
  const [editing, setEditing] = useState(null); // userId being edited
  const [filter, setFilter] = useState('');
  const budgets = (live.data && live.data.budgets) || [];
  const f = filter.trim().toLowerCase();
  const shown = f ? budgets.filter((b) => String(b.userId) === f || String(b.name || '').toLowerCase().includes(f)) : budgets;
  const spentOut = budgets.filter((b) => b.limit > 0 && b.spent >= b.limit).length;

  const saved = (b) => {
    live.setData((d) => d && { ...d, budgets: (d.budgets || []).map((x) => (x.userId === b.userId ? { ...x, ...b } : x)) });
    setEditing(null);
    live.refresh();
  };

  return html`<div class="stack">
    <section class="card card-flush" aria-labelledby="bud-h">
      <header class="card-head card-pad">
        <h2 id="bud-h">Daily budgets</h2>
        <span class="muted small">${live.data ? `${budgets.length} authors · ${spentOut} spent out` : ''}</span>
        <div class="field field-inline">
          <label for="bud-filter">Find author</label>
          <input id="bud-filter" type="search" placeholder="name or id" value=${filter} onInput=${(e) => setFilter(e.currentTarget.value)} />
        </div>
      </header>
      <div class="card-pad"><${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} /></div>
      ${!live.data && !live.error ? html`<div class="card-pad"><${Loading} /></div>` : null}
      ${live.data && !shown.length ? html`<div class="card-pad"><${Empty}>${f ? 'No author matches.' : 'No author has a budget yet.'}<//></div>` : null}
      ${shown.length
        ? html`<${TableWrap} label="Budgets table">
            <table class="table" data-testid="budgets-table">
              <thead><tr>
                <th scope="col">Author</th><th scope="col" class="col-meter">Spent today</th><th scope="col" class="num">Spent</th>
                <th scope="col" class="num">Limit</th><th scope="col">Resets</th><th scope="col"><span class="sr-only">Actions</span></th>
              </tr></thead>
              <tbody>${shown.map((b) => html`<${Row} key=${b.userId} b=${b} ctx=${ctx} now=${now}
                editing=${editing === b.userId} onEdit=${() => setEditing(b.userId)} onCancel=${() => setEditing(null)} onSaved=${saved} />`)}</tbody>
            </table>
          <//>`
        : null}
    </section>
    <p class="muted small">Each screen costs 1 call and each score 3, charged before asking. A job whose charge the rest of the day cannot cover waits for the reset at 00:00 UTC (why <code>budget</code>).</p>
    <${Users} ctx=${ctx} />
  </div>`;
}

// Users: every user with their role and whether they are disabled; rotate a token, disable or
// enable. A disabled user's token and sessions stop working at once; their owed work stays.
function Users({ ctx }) {
  const live = useLive(ctx, () => ctx.api('/api/admin/users?limit=1000'), 10000);
  const [rotating, setRotating] = useState(null); // {user, opener}
  const [busy, setBusy] = useState(null); // userId being changed
  const [confirming, setConfirming] = useState(null); // the user whose Disable awaits confirmation
  const users = (live.data && live.data.users) || [];
  const focusToggle = (id) => requestAnimationFrame(() => document.querySelector(`[data-testid="user-toggle-${id}"]`)?.focus());
  useEffect(() => {
    if (!confirming) return;
    requestAnimationFrame(() => document.querySelector('[data-testid="user-disable-confirm-ok"]')?.focus());
    const onKey = (e) => {
      if (e.key === 'Escape' && !e.defaultPrevented) {
        e.preventDefault();
        setConfirming(null);
        focusToggle(confirming.id);
      }
    };
    addEventListener('keydown', onKey, true);
    return () => removeEventListener('keydown', onKey, true);
  }, [confirming && confirming.id]);

  const toggle = async (u) => {
    setConfirming(null);
    setBusy(u.id);
    try {
      const r = await ctx.api(`/api/admin/users/${encodeURIComponent(u.id)}`, { method: 'PATCH', body: { disabled: !u.disabled } });
      live.setData((d) => d && { ...d, users: (d.users || []).map((x) => (x.id === u.id ? { ...x, ...r } : x)) });
      ctx.notify(`${u.name} is ${r.disabled ? 'disabled: their token and sessions no longer work' : 'enabled again'}.`, 'ok');
    } catch (x) {
      ctx.notify(x.message, 'error');
    } finally {
      setBusy(null);
      focusToggle(u.id);
    }
  };

  return html`<section class="card card-flush" aria-labelledby="users-h">
    ${confirming
      ? html`<div class="card-pad confirm" role="alertdialog" aria-labelledby="user-disable-q" data-testid="user-disable-confirm">
          <p id="user-disable-q">Disable ${confirming.name}? Their token and every browser session stop working at once; their items and owed work stay. <span class="muted small">(Esc cancels)</span></p>
          <div class="row">
            <button type="button" class="btn btn-danger" onClick=${() => toggle(confirming)} data-testid="user-disable-confirm-ok">Yes, disable ${confirming.name}</button>
            <button type="button" class="btn btn-quiet" onClick=${() => {
              const id = confirming.id;
              setConfirming(null);
              focusToggle(id);
            }} data-testid="user-disable-confirm-cancel">Cancel</button>
          </div>
        </div>`
      : null}
    <header class="card-head card-pad">
      <h2 id="users-h">Users and tokens</h2>
      <span class="muted small">${live.data ? `${users.length} users · ${users.filter((u) => u.disabled).length} disabled` : ''}</span>
    </header>
    <div class="card-pad"><${LoadError} error=${live.error} at=${live.at} retry=${live.refresh} /></div>
    ${!live.data && !live.error ? html`<div class="card-pad"><${Loading} /></div>` : null}
    ${users.length
      ? html`<${TableWrap} label="Users table">
          <table class="table" data-testid="users-table">
            <thead><tr><th scope="col">User</th><th scope="col">Role</th><th scope="col">State</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
            <tbody>${users.map((u) => html`<tr key=${u.id} data-testid=${'user-row-' + u.id} class=${u.disabled ? 'row-muted' : ''}>
              <td><span class="strong">${u.name}</span> <span class="muted small num">#${u.id}</span></td>
              <td>${u.role}</td>
              <td>${u.disabled ? html`<${Badge} kind="err" testid=${'user-state-' + u.id}>disabled<//>` : html`<${Badge} kind="ok" testid=${'user-state-' + u.id}>enabled<//>`}</td>
              <td class="actions">
                <button type="button" class="btn btn-small btn-quiet" data-testid=${'user-rotate-' + u.id}
                  aria-label=${'Rotate token of ' + u.name} onClick=${(e) => setRotating({ user: u, opener: e.currentTarget })}>Rotate token</button>
                <button type="button" class=${'btn btn-small ' + (u.disabled ? 'btn-quiet' : 'btn-danger-quiet')} disabled=${busy === u.id}
                  data-testid=${'user-toggle-' + u.id} aria-label=${(u.disabled ? 'Enable ' : 'Disable ') + u.name}
                  onClick=${() => (u.disabled ? toggle(u) : setConfirming(u))}>${u.disabled ? 'Enable' : 'Disable…'}</button>
              </td>
            </tr>`)}</tbody>
          </table>
        <//>`
      : null}
    <p class="muted small card-pad">Rotating a token shows the new one once; the old token and the user's browser sessions stop working at once. Disabling locks a user out the same way until enabled again; their items and owed jobs stay. The last enabled admin cannot be disabled.</p>
    ${rotating ? html`<${RotateDialog} ctx=${ctx} user=${rotating.user} onClose=${() => {
      const opener = rotating.opener;
      setRotating(null);
      // Focus goes back to the button that opened the dialog.
      setTimeout(() => opener && opener.isConnected && opener.focus(), 0);
    }} />` : null}
  </section>`;
}

// RotateDialog asks to confirm, rotates, and shows the new token once. A modal <dialog> keeps
// focus inside while open, closes on Escape, and is announced by its heading.
function RotateDialog({ ctx, user, onClose }) {
  const dlg = useRef(null);
  const first = useRef(null);
  const tokenBox = useRef(null);
  const [token, setToken] = useState(null);
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState(false);
  const [leaving, setLeaving] = useState(false); // Esc with the token shown: warn first

  useEffect(() => {
    const d = dlg.current;
    if (d && !d.open) d.showModal();
    first.current && first.current.focus();
  }, []);
  useEffect(() => {
    if (token && tokenBox.current) tokenBox.current.focus();
  }, [token]);

  const rotate = async () => {
    setBusy(true);
    setErr(null);
    try {
      const r = await ctx.api(`/api/admin/users/${encodeURIComponent(user.id)}/token`, { method: 'POST' });
      setToken(r.token);
    } catch (x) {
      setErr(x.message);
    } finally {
      setBusy(false);
    }
  };
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(token);
      ctx.notify('Token copied to the clipboard.', 'ok');
    } catch {
      const sel = getSelection();
      const r = document.createRange();
      r.selectNodeContents(tokenBox.current);
      sel.removeAllRanges();
      sel.addRange(r);
      ctx.notify('Copy failed: the token is selected, press Ctrl+C.', 'warn');
    }
  };
  const close = () => {
    if (dlg.current && dlg.current.open) dlg.current.close();
  };
  // Esc while the token is shown does not close at once: the token cannot be shown again.
  const onCancel = (e) => {
    if (!token) return;
    e.preventDefault();
    setLeaving(true);
    requestAnimationFrame(() => document.querySelector('[data-testid="rotate-leave-back"]')?.focus());
  };

  return html`<dialog ref=${dlg} class="dialog" aria-labelledby="rot-h" aria-describedby="rot-d" data-testid="rotate-dialog" onClose=${onClose} onCancel=${onCancel}>
    <h2 id="rot-h">${token ? `New token for ${user.name}` : `Rotate the token of ${user.name}?`}</h2>
    ${token
      ? html`<p id="rot-d">Store it now: <strong>it is shown only once</strong>. The old token and ${user.name}'s sessions no longer work.</p>
          <div class="secret">
            <code ref=${tokenBox} tabindex="-1" class="secret-value" data-testid="rotate-token">${token}</code>
            <button type="button" class="btn btn-small" onClick=${copy} data-testid="rotate-copy">Copy</button>
          </div>
          ${leaving
            ? html`<div class="confirm" role="alert" data-testid="rotate-leave">
                <p><strong>Close without storing the token?</strong> It cannot be shown again; you would have to rotate it once more.</p>
                <div class="row">
                  <button type="button" class="btn btn-quiet" onClick=${() => {
                    setLeaving(false);
                    tokenBox.current && tokenBox.current.focus();
                  }} data-testid="rotate-leave-back">Back to the token</button>
                  <button type="button" class="btn btn-danger" onClick=${close} data-testid="rotate-leave-ok">Close anyway</button>
                </div>
              </div>`
            : null}
          <div class="row"><button type="button" class="btn btn-primary" onClick=${close} data-testid="rotate-done">I have stored it</button></div>`
      : html`<p id="rot-d">A new token is made and shown once. The old token and every browser session of ${user.name} stop working at once.</p>
          ${err ? html`<p class="field-error" role="alert" data-testid="rotate-error">${err}</p>` : null}
          <div class="row">
            <button type="button" ref=${first} class="btn btn-danger" disabled=${busy} onClick=${rotate} data-testid="rotate-confirm">${busy ? 'Rotating…' : 'Rotate token'}</button>
            <button type="button" class="btn btn-quiet" onClick=${close} data-testid="rotate-cancel">Cancel</button>
          </div>`}
  </dialog>`;
}

function Row({ b, ctx, now, editing, onEdit, onCancel, onSaved }) {
  const [value, setValue] = useState(String(b.limit ?? ''));
  const [err, setErr] = useState(null);
  const [saving, setSaving] = useState(false);
  const input = useRef(null);

  const wasEditing = useRef(editing);
  useEffect(() => {
    if (editing) {
      setValue(String(b.limit ?? ''));
      setErr(null);
      setTimeout(() => input.current && input.current.select(), 0);
    } else if (wasEditing.current) {
      // The editor closed (saved, cancelled, Esc): the focus goes back to its opener.
      requestAnimationFrame(() => document.querySelector(`[data-testid="budget-edit-${b.userId}"]`)?.focus());
    }
    wasEditing.current = editing;
  }, [editing]);

  const save = async (e) => {
    e.preventDefault();
    const raw = (input.current ? input.current.value : value).trim();
    const n = Number(raw);
    if (raw === '' || !Number.isInteger(n) || n < 0) {
      setErr('Enter a whole number of calls, 0 or more.');
      return;
    }
    setSaving(true);
    try {
      const r = await ctx.api(`/api/admin/users/${encodeURIComponent(b.userId)}/budget`, { method: 'PUT', body: { dailyLimit: n } });
      // The answer is the author's budget row: {userId, name, limit, spent, resetsAt}.
      const next = r && r.userId === b.userId ? r : { ...b, limit: n };
      ctx.notify(`Daily limit of ${b.name || 'author ' + b.userId} is now ${fmt.number(n)}.`, 'ok');
      onSaved(next);
    } catch (x) {
      setErr(x.message);
    } finally {
      setSaving(false);
    }
  };

  const limit = b.limit || 0;
  const over = limit > 0 && b.spent >= limit;
  const errId = 'bud-err-' + b.userId;
  return html`<tr data-testid=${'budget-row-' + b.userId} class=${over ? 'row-warn' : ''}>
    <td><span class="strong">${b.name || '—'}</span> <span class="muted small num">#${b.userId}</span></td>
    <td class="col-meter">
      <meter min="0" max=${Math.max(1, limit)} low=${limit * 0.7} high=${limit * 0.9} optimum="0" value=${Math.min(b.spent || 0, Math.max(1, limit))}
        aria-label=${`${b.name || b.userId}: ${b.spent} of ${limit} calls spent`}></meter>
      <span class="small num">${fmt.percent(b.spent || 0, limit)}</span>
      ${over ? html` <${Badge} kind="warn" title="jobs wait for the reset">spent out<//>` : null}
    </td>
    <td class="num">${fmt.number(b.spent)}</td>
    <td class="num">
      ${editing
        ? html`<form class="inline-edit" onSubmit=${save} novalidate>
            <label class="sr-only" for=${'bud-limit-' + b.userId}>Daily limit for ${b.name || b.userId}</label>
            <input id=${'bud-limit-' + b.userId} ref=${input} type="number" min="0" step="1" inputmode="numeric" value=${value}
              onInput=${(e) => setValue(e.currentTarget.value)} onKeyDown=${(e) => e.key === 'Escape' && onCancel()}
              aria-invalid=${err ? 'true' : 'false'} aria-describedby=${errId} data-testid=${'budget-limit-' + b.userId} />
            <button type="submit" class="btn btn-small btn-primary" disabled=${saving} data-testid=${'budget-save-' + b.userId}>${saving ? '…' : 'Save'}</button>
            <button type="button" class="btn btn-small btn-quiet" onClick=${onCancel}>Cancel</button>
            ${err ? html`<p class="field-error" id=${errId} role="alert" data-testid=${'budget-error-' + b.userId}>${err}</p>` : null}
          </form>`
        : fmt.number(b.limit)}
    </td>
    <td><${Rel} at=${b.resetsAt} now=${now} /></td>
    <td class="actions">${editing
      ? null
      : html`<button type="button" class="btn btn-small btn-quiet" onClick=${onEdit} aria-label=${'Edit limit of ' + (b.name || b.userId)} data-testid=${'budget-edit-' + b.userId}>Edit limit</button>`}</td>
  </tr>`;
}

export default {
  id: 'budgets',
  title: 'Budgets',
  mount(el, ctx) {
    render(html`<${Budgets} ctx=${ctx} />`, el);
    return () => render(null, el);
  },
};
