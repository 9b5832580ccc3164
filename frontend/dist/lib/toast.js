// Toasts (ctx.notify): short messages in an aria-live region over the header band at the top
// right, where they cover no data of a panel (see style.css). kind: "info" (default), "ok",
// "warn" or "error". Errors stay longer and are announced assertively. opts.ms sets how long
// one stays; opts.action = {label, run, testid} adds a button (e.g. Undo) that runs once and
// dismisses the toast.

const KINDS = new Set(['info', 'ok', 'warn', 'error']);

function region(id, live) {
  let el = document.getElementById(id);
  if (!el) {
    el = document.createElement('div');
    el.id = id;
    document.body.appendChild(el);
  }
  el.className = 'toasts';
  el.setAttribute('aria-live', live);
  el.setAttribute('aria-relevant', 'additions');
  return el;
}

export function notify(message, kind = 'info', opts = {}) {
  if (!KINDS.has(kind)) kind = 'info';
  const host = region('toasts', 'polite');
  host.setAttribute('data-testid', 'toasts');
  const t = document.createElement('div');
  t.className = 'toast toast-' + kind;
  t.setAttribute('data-testid', 'toast');
  t.setAttribute('data-kind', kind);
  if (kind === 'error') t.setAttribute('role', 'alert');

  const text = document.createElement('span');
  text.className = 'toast-text';
  text.textContent = String(message);
  const close = document.createElement('button');
  close.type = 'button';
  close.className = 'toast-close';
  close.setAttribute('aria-label', 'Dismiss');
  close.textContent = '×';
  t.append(text);
  if (opts.action) {
    const act = document.createElement('button');
    act.type = 'button';
    act.className = 'btn btn-small toast-action';
    act.textContent = opts.action.label;
    if (opts.action.testid) act.setAttribute('data-testid', opts.action.testid);
    act.addEventListener('click', () => {
      remove();
      opts.action.run();
    });
    t.append(act);
  }
  t.append(close);

  let timer = null;
  let gone = false;
  const remove = () => {
    if (gone) return;
    gone = true;
    clearTimeout(timer);
    t.classList.add('toast-out');
    setTimeout(() => t.remove(), 160);
  };
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(remove, opts.ms || (kind === 'error' ? 9000 : 5000));
  };
  close.addEventListener('click', remove);
  t.addEventListener('mouseenter', () => clearTimeout(timer));
  t.addEventListener('mouseleave', arm);
  t.addEventListener('focusin', () => clearTimeout(timer));
  t.addEventListener('focusout', arm);

  host.appendChild(t);
  while (host.children.length > 5) host.firstElementChild.remove();
  arm();
  return remove;
}
