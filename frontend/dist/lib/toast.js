// Toasts (ctx.notify): short messages in an aria-live region at the corner of the page.
// kind: "info" (default), "ok", "warn" or "error". Errors stay longer and are announced
// assertively.

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
  t.append(text, close);

  let timer = null;
  const remove = () => {
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
