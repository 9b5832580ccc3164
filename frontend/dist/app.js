// The admin shell: session (sign in / out), the plugin manifest, one tab per plugin with its
// own URL (/admin/<id>), and mounting each plugin into its panel on first visit. Panels stay
// mounted while hidden (their polls pause) and are all unmounted on sign-out.

import { html, render, useState, useEffect, useLayoutEffect, useRef, useCallback } from './vendor/preact-htm.js';
import { createApi } from './lib/api.js';
import { makeCtx } from './lib/ctx.js';
import { notify } from './lib/toast.js';
import { Confirm } from './lib/ui.js';

const BASE = '/admin';

// A deep link to a job as #/jobs/123 (any page of the console) is the jobs panel's ?job=123.
{
  const m = /^#\/jobs\/(\d+)$/.exec(location.hash);
  if (m) history.replaceState(null, '', BASE + '/jobs?job=' + m[1]);
}

function routeId() {
  const rest = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '';
  const first = rest.replace(/^\/+/, '').split('/')[0] || '';
  try {
    return decodeURIComponent(first);
  } catch {
    return first;
  }
}

/** The part of the URL after /admin/<id>: a panel's own path (/revision/12) and query. */
function routeRest() {
  const rest = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length).replace(/^\/+/, '') : '';
  const slash = rest.indexOf('/');
  const tail = slash < 0 ? '' : rest.slice(slash).replace(/\/+$/, '');
  return tail + location.search;
}

let onUnauthorized = null;
const api = createApi({ onUnauthorized: (e) => onUnauthorized && onUnauthorized(e) });

function App() {
  const [phase, setPhase] = useState('loading'); // loading | signin | forbidden | error | ready
  const [user, setUser] = useState(null);
  const [notice, setNotice] = useState(null);
  const [bootError, setBootError] = useState(null);

  const check = useCallback(async () => {
    setPhase('loading');
    try {
      const s = await api('/api/session');
      const u = s && s.user;
      if (!u) {
        setPhase('signin');
        return;
      }
      setUser(u);
      setPhase(u.role === 'admin' ? 'ready' : 'forbidden');
    } catch (e) {
      if (e.status === 401) {
        setPhase('signin');
        return;
      }
      setBootError(e);
      setPhase('error');
    }
  }, []);

  useEffect(() => {
    check();
    onUnauthorized = () => {
      setUser(null);
      setNotice('Your session has ended. Sign in again.');
      setPhase('signin');
    };
    return () => {
      onUnauthorized = null;
    };
  }, []);

  const signOut = useCallback(async (message = 'Signed out.') => {
    try {
      await api('/api/session', { method: 'DELETE' });
    } catch (e) {
      if (e.status !== 401) notify('Sign-out failed: ' + e.message, 'error');
    }
    setUser(null);
    setNotice(message);
    setPhase('signin');
  }, []);

  useEffect(() => {
    if (phase !== 'ready') document.title = 'owed admin';
  }, [phase]);

  switch (phase) {
    case 'loading':
      return html`<div class="center"><p class="muted" aria-busy="true">Loading…</p></div>`;
    case 'signin':
      return html`<${SignIn} notice=${notice} onDone=${() => {
        setNotice(null);
        check();
      }} />`;
    case 'forbidden':
      return html`<div class="center">
        <div class="card signin-card" data-testid="forbidden" role="alert">
          <h1 class="signin-title">Admins only</h1>
          <p>You are signed in as <strong>${user.name}</strong> (role <code>${user.role}</code>).
            This console needs an <strong>admin</strong> token.</p>
          <div class="row">
            <button type="button" class="btn btn-primary" onClick=${() => signOut(null)} data-testid="signout">Sign in with another token</button>
          </div>
        </div>
      </div>`;
    case 'error':
      return html`<div class="center">
        <div class="card signin-card" role="alert">
          <h1 class="signin-title">Cannot reach owed</h1>
          <p>${bootError ? bootError.message : 'Unknown error.'}</p>
          <button type="button" class="btn btn-primary" onClick=${check}>Try again</button>
        </div>
      </div>`;
    default:
      return html`<${Console} user=${user} onSignOut=${() => signOut()} />`;
  }
}

function SignIn({ notice, onDone }) {
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState(null);
  const input = useRef(null);

  useEffect(() => {
    input.current && input.current.focus();
  }, []);

  const submit = async (e) => {
    e.preventDefault();
    // Read the field itself: a fast typist (or a test driver) may submit before the
    // state update from the last keystroke has rendered.
    const t = (input.current ? input.current.value : token).trim();
    if (!t) {
      setErr({ message: 'Enter the admin token.', field: 'token' });
      input.current && input.current.focus();
      return;
    }
    setBusy(true);
    setErr(null);
    try {
      await api('/api/session', { method: 'POST', body: { token: t } });
      setToken('');
      onDone();
    } catch (x) {
      setErr({
        message: x.status === 401 ? x.message || 'That token was not accepted.' : x.message,
        field: x.field || 'token',
      });
      setBusy(false);
      input.current && input.current.select();
    }
  };

  const invalid = !!(err && (err.field === 'token' || !err.field));
  return html`<div class="center">
    <form class="card signin-card" onSubmit=${submit} novalidate data-testid="signin-form">
      <h1 class="signin-title"><${Logo} /> owed <span class="muted">admin</span></h1>
      ${notice ? html`<p class="note note-info" role="status">${notice}</p>` : null}
      <div class=${'field' + (invalid ? ' field-invalid' : '')}>
        <label for="signin-token">Admin token</label>
        <input id="signin-token" ref=${input} type="password" autocomplete="current-password" spellcheck="false"
          value=${token} onInput=${(e) => setToken(e.currentTarget.value)}
          aria-invalid=${invalid ? 'true' : 'false'} aria-describedby="signin-hint signin-error"
          data-testid="signin-token" />
        <p id="signin-hint" class="hint">OWED_ADMIN_TOKEN, or the token printed once on first start.</p>
      </div>
      <p id="signin-error" class="field-error" role="alert" data-testid="signin-error" hidden=${!err}>${err ? err.message : ''}</p>
      <button type="submit" class="btn btn-primary btn-block" disabled=${busy} data-testid="signin-submit">${busy ? 'Signing in…' : 'Sign in'}</button>
    </form>
  </div>`;
}

function Logo() {
  return html`<svg class="logo" viewBox="0 0 24 24" aria-hidden="true" focusable="false">
    <circle cx="12" cy="12" r="9" fill="none" stroke="currentColor" stroke-width="2.5" />
    <path d="M12 7v5l3.5 2" fill="none" stroke="currentColor" stroke-width="2.5" stroke-linecap="round" />
  </svg>`;
}

function Console({ user, onSignOut }) {
  const [plugins, setPlugins] = useState(null);
  const [manifestError, setManifestError] = useState(null);
  const [active, setActive] = useState(routeId());
  const [locKey, setLocKey] = useState(0); // bumped on every navigation, to notice query changes
  const host = useRef(null);
  const mounted = useRef(new Map()); // id → {section, poller, unmount}
  const searches = useRef({}); // id → last "?query" of that panel
  const activeRef = useRef(active);
  activeRef.current = active;
  const tabsRef = useRef(null);

  const go = useCallback((id, opts = {}) => {
    const search = opts.search !== undefined ? opts.search : searches.current[id] || '';
    const url = BASE + '/' + encodeURIComponent(id) + search;
    if (url !== location.pathname + location.search) {
      if (opts.replace) history.replaceState(null, '', url);
      else history.pushState(null, '', url);
    }
    setActive(id);
    setLocKey((k) => k + 1);
  }, []);

  const loadManifest = useCallback(async () => {
    setManifestError(null);
    let list;
    try {
      const m = await api('/api/admin/plugins');
      list = (m && m.plugins) || [];
    } catch (e) {
      setManifestError(e);
      return;
    }
    list = list.filter((p) => p && p.id && p.module).map((p) => ({ ...p, title: p.title || p.id, status: 'loading' }));
    setPlugins(list);
    list.forEach((p) => {
      import(p.module)
        .then((mod) => {
          const def = mod && mod.default;
          if (!def || typeof def.mount !== 'function') throw new Error('the module has no default export with mount(el, ctx)');
          return { ...p, title: p.title || def.title || p.id, status: 'ready', def };
        })
        .catch((e) => ({ ...p, status: 'failed', error: e }))
        .then((next) => setPlugins((cur) => cur && cur.map((x) => (x.id === next.id ? next : x))));
    });
  }, []);

  useEffect(() => {
    loadManifest();
    const onPop = () => {
      setActive(routeId());
      setLocKey((k) => k + 1);
    };
    addEventListener('popstate', onPop);
    return () => {
      removeEventListener('popstate', onPop);
      const all = [...mounted.current.values()];
      mounted.current.clear();
      // Outside the shell's own unmount, for the same reason as mounting.
      queueMicrotask(() => all.forEach(unmountPanel));
    };
  }, []);

  // "/admin/" alone shows the first panel.
  useEffect(() => {
    if (plugins && plugins.length && !active) go(plugins[0].id, { replace: true, search: location.search });
  }, [plugins, active]);

  // Mount the active panel on first visit; show it and hide the others. This runs in a
  // microtask, outside Preact's render and effect flush: a plugin renders its own Preact
  // root synchronously in mount(), which must not happen while the shell is rendering.
  useEffect(() => {
    let cancelled = false;
    queueMicrotask(() => {
      if (cancelled || !plugins || !host.current) return;
      const p = plugins.find((x) => x.id === active);
      if (p && p.status !== 'loading' && !mounted.current.has(p.id)) {
        mounted.current.set(p.id, mountPanel(p, host.current, { user, go, searches, activeRef }));
      }
      for (const [id, m] of mounted.current) {
        const on = id === active;
        m.section.hidden = !on;
        m.poller && m.poller.setActive(on);
      }
      if (p) {
        document.title = p.title + ' · owed admin';
        const m = mounted.current.get(p.id);
        const before = searches.current[p.id] || '';
        searches.current[p.id] = routeRest();
        // A navigation that changed the path or query of a mounted panel (a link from another
        // panel, back/forward) tells the panel through ctx.onParams.
        if (m && m.section && before !== searches.current[p.id]) {
          m.section.dispatchEvent(new CustomEvent('owed:params', { detail: new URLSearchParams(location.search) }));
        }
      }
    });
    return () => {
      cancelled = true;
    };
  }, [plugins, active, locKey]);

  const onTabKey = (e) => {
    if (!plugins) return;
    const tabs = [...e.currentTarget.querySelectorAll('[role=tab]:not([hidden])')];
    const i = tabs.indexOf(document.activeElement);
    if (i < 0) return;
    let j = null;
    if (e.key === 'ArrowRight' || e.key === 'ArrowDown') j = (i + 1) % tabs.length;
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowUp') j = (i - 1 + tabs.length) % tabs.length;
    else if (e.key === 'Home') j = 0;
    else if (e.key === 'End') j = tabs.length - 1;
    if (j === null) return;
    e.preventDefault();
    tabs[j].focus();
    go(tabs[j].dataset.id);
  };
  const fit = useFit(tabsRef, plugins);
  const shown = (plugins || []).map((p) => p.id);
  let visible = new Set(shown.slice(0, fit));
  if (fit < shown.length && active && shown.includes(active) && !visible.has(active)) {
    // The active panel's tab always shows: it takes the last place that fits.
    visible = new Set(shown.slice(0, Math.max(0, fit - 1)).concat([active]));
  }
  const overflow = (plugins || []).filter((p) => !visible.has(p.id));

  const current = plugins && plugins.find((p) => p.id === active);
  return html`<div class="shell">
    <h1 class="sr-only">owed admin${current ? ' — ' + current.title : ''}</h1>
    <header class="topbar">
      <a class="brand" href=${BASE + '/'} onClick=${(e) => {
        if (e.metaKey || e.ctrlKey || e.shiftKey || !plugins || !plugins.length) return;
        e.preventDefault();
        go(plugins[0].id);
      }}><${Logo} /><span>owed</span><span class="brand-sub">admin</span></a>
      <nav class="tabs" aria-label="Panels" ref=${tabsRef}>
        <div role="tablist" class="tablist" onKeyDown=${onTabKey}>
          ${(plugins || []).map(
            (p) => html`<a role="tab" class=${'tab' + (p.status === 'failed' ? ' tab-failed' : '')} id=${'tab-' + p.id} data-id=${p.id}
              hidden=${!visible.has(p.id)}
              href=${BASE + '/' + encodeURIComponent(p.id) + (p.id === active ? '' : searches.current[p.id] || '')}
              aria-selected=${p.id === active ? 'true' : 'false'} aria-controls=${'panel-' + p.id}
              tabindex=${p.id === active ? '0' : '-1'} data-testid=${'tab-' + p.id}
              onClick=${(e) => {
                if (e.metaKey || e.ctrlKey || e.shiftKey || e.button === 1) return;
                e.preventDefault();
                go(p.id);
              }}>${p.title}</a>`
          )}
        </div>
        ${overflow.length ? html`<${MoreTabs} plugins=${overflow} go=${go} />` : null}
      </nav>
      <div class="who">
        <span class="who-name" title=${'user ' + user.id}>${user.name}</span>
        <button type="button" class="btn btn-small btn-quiet" onClick=${onSignOut} data-testid="signout">Sign out</button>
      </div>
    </header>
    <main class="main" id="main">
      <${HoldBanner} />
      ${manifestError
        ? html`<div class="note note-err" role="alert">Could not load the panels: ${manifestError.message}
            <button type="button" class="btn btn-small" onClick=${loadManifest}>Retry</button></div>`
        : null}
      ${!plugins && !manifestError ? html`<p class="muted" aria-busy="true">Loading panels…</p>` : null}
      ${plugins && active && !current
        ? html`<div class="card" role="alert" data-testid="panel-missing">
            <p>There is no panel named <code>${active}</code>.</p>
            ${plugins.length ? html`<p><a href=${BASE + '/' + plugins[0].id} onClick=${(e) => {
              e.preventDefault();
              go(plugins[0].id);
            }}>Go to ${plugins[0].title}</a></p>` : null}
          </div>`
        : null}
      ${current && current.status === 'loading' ? html`<p class="muted" aria-busy="true">Loading ${current.title}…</p>` : null}
      <div class="panels" ref=${host}></div>
    </main>
  </div>`;
}

/** The width the "More" button takes beside the tabs that fit. */
const MORE_WIDTH = 96;

/**
 * useFit answers how many of the plugins' tabs fit in one row of the nav (all of them, or as
 * many as leave room for the "More" menu), measured now and whenever the nav's width changes.
 * Each tab's width is remembered from when it last showed.
 */
function useFit(navRef, plugins) {
  const [fit, setFit] = useState(Infinity);
  const widths = useRef({});
  const key = (plugins || []).map((p) => p.id + ':' + p.title).join('|');
  useLayoutEffect(() => {
    const nav = navRef.current;
    if (!nav || !plugins) return;
    const measure = () => {
      for (const t of nav.querySelectorAll('[role=tab]')) if (!t.hidden && t.offsetWidth) widths.current[t.dataset.id] = t.offsetWidth + 2;
      const room = nav.clientWidth;
      const w = plugins.map((p) => widths.current[p.id] || 120);
      const all = w.reduce((a, b) => a + b, 0);
      if (all <= room) return setFit(plugins.length);
      let used = MORE_WIDTH;
      let n = 0;
      while (n < w.length && used + w[n] <= room) used += w[n++];
      setFit(n);
    };
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(nav);
    return () => ro.disconnect();
  }, [key]);
  return fit;
}

/** The tabs that do not fit, in a menu: Esc or a choice closes it, the focus back on its button. */
function MoreTabs({ plugins, go }) {
  const [open, setOpen] = useState(false);
  const btn = useRef(null);
  const menu = useRef(null);
  useEffect(() => {
    if (!open) return;
    menu.current && menu.current.querySelector('[role=menuitem]')?.focus();
    const away = (e) => {
      if (!menu.current || menu.current.contains(e.target) || btn.current.contains(e.target)) return;
      setOpen(false);
    };
    addEventListener('pointerdown', away);
    return () => removeEventListener('pointerdown', away);
  }, [open]);
  const close = (focus = true) => {
    setOpen(false);
    if (focus) btn.current && btn.current.focus();
  };
  const onKey = (e) => {
    const items = [...menu.current.querySelectorAll('[role=menuitem]')];
    const i = items.indexOf(document.activeElement);
    if (e.key === 'Escape') {
      e.preventDefault();
      close();
    } else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      items[(i + (e.key === 'ArrowDown' ? 1 : items.length - 1)) % items.length].focus();
    }
  };
  return html`<div class="more-tabs">
    <button type="button" class="tab tab-more" ref=${btn} aria-haspopup="menu" aria-expanded=${open ? 'true' : 'false'}
      aria-controls="more-tabs-menu" onClick=${() => setOpen(!open)} data-testid="tabs-more">More <span aria-hidden="true">▾</span></button>
    ${open
      ? html`<div class="menu" role="menu" id="more-tabs-menu" aria-label="More panels" ref=${menu} onKeyDown=${onKey} data-testid="tabs-more-menu">
          ${plugins.map((p) => html`<a role="menuitem" class="menu-item" href=${BASE + '/' + encodeURIComponent(p.id)} data-testid=${'menu-' + p.id}
            onClick=${(e) => {
              if (e.metaKey || e.ctrlKey || e.shiftKey || e.button === 1) return;
              e.preventDefault();
              close(false);
              go(p.id);
              requestAnimationFrame(() => document.getElementById('tab-' + p.id)?.focus());
            }}>${p.title}</a>`)}
        </div>`
      : null}
  </div>`;
}

const HELD = { screen: 'screens', score: 'scores', deliveries: 'webhook deliveries' };

/** What a lift did, from the holds the server answers: what runs now and what stays held. */
function liftedInWords(asked, h) {
  const lifted = asked.filter((k) => !h[k]);
  const still = Object.keys(HELD).filter((k) => h[k]);
  const said = lifted.length ? `Lifted: ${lifted.map((k) => HELD[k]).join(', ')} — the held ones run now.` : 'Nothing was lifted.';
  return said + (still.length ? ` Still held: ${still.map((k) => HELD[k]).join(', ')} — nothing of it runs until lifted.` : '');
}

/**
 * HoldBanner shows, on every panel, what an admin holds (GET /api/admin/holds every 10 s) with
 * the button that lifts it: held work is not claimed by any replica until then. Lifting asks
 * first, naming what is lifted; the operator picks which holds go (all of them at first).
 */
function HoldBanner() {
  const [holds, setHolds] = useState(null);
  const [busy, setBusy] = useState(false);
  const [picked, setPicked] = useState(null); // the holds to lift while asking, else null
  const load = useCallback(async () => {
    try {
      setHolds(await api('/api/admin/holds'));
    } catch {
      // The panels report the server's outages; the banner keeps what it last knew.
    }
  }, []);
  useEffect(() => {
    load();
    const t = setInterval(() => !document.hidden && load(), 10_000);
    const onChange = (e) => setHolds(e.detail);
    addEventListener('owed:holds', onChange);
    return () => {
      clearInterval(t);
      removeEventListener('owed:holds', onChange);
    };
  }, []);
  const held = holds ? Object.keys(HELD).filter((k) => holds[k]) : [];
  if (!held.length) return null;
  const asking = picked && picked.filter((k) => holds[k]);
  // The button goes with the banner: the focus goes to the panel beneath it (or back to the
  // button while something is still held).
  const refocus = () =>
    requestAnimationFrame(() => (document.querySelector('[data-testid="hold-lift"]') || document.querySelector('.panel:not([hidden])'))?.focus());
  const cancel = () => {
    setPicked(null);
    refocus();
  };
  const lift = async () => {
    setBusy(true);
    try {
      const h = await api('/api/admin/holds', { method: 'PUT', body: Object.fromEntries(asking.map((k) => [k, false])) });
      setHolds(h);
      dispatchEvent(new CustomEvent('owed:holds', { detail: h }));
      notify(liftedInWords(asking, h), 'ok');
    } catch (e) {
      notify('Could not lift the hold: ' + e.message, 'error');
    }
    setBusy(false);
    cancel();
  };
  const toggle = (k) => setPicked((p) => (p.includes(k) ? p.filter((x) => x !== k) : [...p, k]));
  return html`<div class="note note-warn hold-banner" role="status" data-testid="hold-banner">
    <span><strong>On hold:</strong> ${held.map((k) => HELD[k]).join(', ')}. Nothing held is claimed, charged or sent until the hold is lifted.</span>
    ${asking
      ? html`<fieldset class="hold-pick" data-testid="hold-pick">
            <legend>Lift the hold on</legend>
            ${held.map((k) => html`<label><input type="checkbox" checked=${asking.includes(k)} onChange=${() => toggle(k)} data-testid=${'hold-pick-' + k} /> ${HELD[k]}</label>`)}
          </fieldset>
          <${Confirm} text=${asking.length ? `Lift the hold on ${asking.map((k) => HELD[k]).join(', ')}?` : 'Pick what to lift.'}
            confirmLabel=${busy ? 'Lifting…' : 'Yes, lift it'} busy=${busy} disabled=${!asking.length} onConfirm=${lift} onCancel=${cancel} testid="hold-lift-confirm" />`
      : html`<button type="button" class="btn btn-small btn-primary" onClick=${() => setPicked(held)} data-testid="hold-lift">Lift the hold…</button>`}
  </div>`;
}

function mountPanel(p, hostEl, { user, go, searches, activeRef }) {
  const section = document.createElement('section');
  section.className = 'panel';
  section.id = 'panel-' + p.id;
  section.setAttribute('role', 'tabpanel');
  section.setAttribute('aria-labelledby', 'tab-' + p.id);
  section.setAttribute('data-testid', 'panel-' + p.id);
  section.tabIndex = -1;
  hostEl.appendChild(section);

  const failed = (what, e) => {
    console.error(`plugin ${p.id}:`, e);
    section.textContent = '';
    const box = document.createElement('div');
    box.className = 'note note-err';
    box.setAttribute('role', 'alert');
    box.textContent = `The ${p.title} panel ${what}: ${(e && e.message) || e}`;
    section.appendChild(box);
  };

  if (p.status === 'failed') {
    failed('could not be loaded from ' + p.module, p.error);
    return { section, poller: null, unmount: null };
  }

  const rest = () => (activeRef.current === p.id ? routeRest() : searches.current[p.id] || '');
  const params = () => {
    const r = rest();
    const q = r.indexOf('?');
    return new URLSearchParams(q < 0 ? '' : r.slice(q));
  };
  const path = () => {
    const r = rest();
    const q = r.indexOf('?');
    return (q < 0 ? r : r.slice(0, q)).split('/').filter(Boolean).map((x) => {
      try {
        return decodeURIComponent(x);
      } catch {
        return x;
      }
    });
  };
  const setParams = (obj) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(obj || {})) if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
    const search = q.toString() ? '?' + q.toString() : '';
    const r = rest();
    const tail = r.indexOf('?') < 0 ? r : r.slice(0, r.indexOf('?'));
    searches.current[p.id] = tail + search;
    if (activeRef.current === p.id) history.replaceState(null, '', BASE + '/' + encodeURIComponent(p.id) + tail + search);
  };
  const onParams = (cb) => {
    const h = (e) => cb(e.detail);
    section.addEventListener('owed:params', h);
    return () => section.removeEventListener('owed:params', h);
  };
  const { ctx, poller } = makeCtx(p, {
    user,
    api,
    navigate: (id, search) => go(id, { search: search === undefined ? undefined : search ? (/^[?/]/.test(String(search)) ? String(search) : '?' + search) : '' }),
    params,
    path,
    setParams,
    onParams,
  });
  const entry = { section, poller, unmount: null };
  try {
    const r = p.def.mount(section, ctx);
    if (typeof r === 'function') entry.unmount = r;
    else if (r && typeof r.then === 'function') {
      r.then((f) => {
        if (typeof f === 'function') entry.unmount = f;
      }, (e) => failed('failed to start', e));
    }
  } catch (e) {
    failed('failed to start', e);
  }
  return entry;
}

function unmountPanel(m) {
  try {
    m.unmount && m.unmount();
  } catch (e) {
    console.error('unmount:', e);
  }
  m.poller && m.poller.stopAll();
  m.section.remove();
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
