// Polling for one mounted panel (ctx.poll). A poll runs its function at once, then again `ms`
// after each run finishes (never two runs at once). It pauses while the document is hidden or
// the panel is not the active tab, runs at once when either comes back, and every poll of the
// panel stops when the panel unmounts.

export function createPoller() {
  const entries = new Set();
  let active = true;

  const live = () => active && !document.hidden;

  function poll(fn, ms = 3000) {
    const entry = { timer: null, running: false, again: false, paused: false, stopped: false };
    const every = Math.max(250, Number(ms) || 3000);

    const schedule = () => {
      clearTimeout(entry.timer);
      entry.timer = entry.stopped ? null : setTimeout(tick, every);
    };

    async function tick() {
      entry.timer = null;
      if (entry.stopped) return;
      if (!live()) {
        entry.paused = true;
        return;
      }
      if (entry.running) {
        entry.again = true;
        return;
      }
      entry.running = true;
      try {
        await fn();
      } catch (e) {
        console.warn('poll:', e);
      } finally {
        entry.running = false;
      }
      if (entry.stopped) return;
      if (entry.again) {
        entry.again = false;
        tick();
      } else schedule();
    }

    entry.resume = () => {
      if (entry.stopped) return;
      entry.paused = false;
      clearTimeout(entry.timer);
      entry.timer = null;
      tick();
    };

    const stop = () => {
      entry.stopped = true;
      clearTimeout(entry.timer);
      entry.timer = null;
      entries.delete(entry);
    };
    /** Run now (e.g. after an action), then continue the schedule. */
    stop.now = () => entry.resume();
    stop.refresh = stop.now;

    entries.add(entry);
    tick();
    return stop;
  }

  function wake() {
    if (!live()) return;
    for (const e of entries) if (e.paused || e.timer) e.resume();
  }

  const onVisibility = () => {
    if (!document.hidden) wake();
  };
  document.addEventListener('visibilitychange', onVisibility);

  return {
    poll,
    /** The panel became (in)active: pausing is lazy, resuming runs every poll at once. */
    setActive(on) {
      const was = active;
      active = !!on;
      if (active && !was) wake();
    },
    isActive: () => active,
    stopAll() {
      for (const e of [...entries]) {
        e.stopped = true;
        clearTimeout(e.timer);
      }
      entries.clear();
      document.removeEventListener('visibilitychange', onVisibility);
    },
  };
}
