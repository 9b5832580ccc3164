// Formatters shared by the shell and every plugin (ctx.fmt). Each one answers "—" for a
// missing value (null or undefined), so a panel can pass the API's nulls straight through.

const DASH = '—';
const missing = (v) => v === null || v === undefined || (typeof v === 'number' && !Number.isFinite(v));

const UNITS = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
];

/** A span of time, two units at most: "850ms", "45s", "3m 20s", "2h 5m", "3d 4h". */
export function duration(ms) {
  if (missing(ms)) return DASH;
  const neg = ms < 0;
  let left = Math.abs(Math.round(ms));
  if (left < 1000) return (neg ? '-' : '') + left + 'ms';
  const parts = [];
  for (const [unit, size] of UNITS) {
    if (left >= size || parts.length) {
      const n = Math.floor(left / size);
      left -= n * size;
      if (n > 0 || parts.length) parts.push(n + unit);
      if (parts.length === 2) break;
    }
  }
  // "3m 0s" reads worse than "3m".
  const text = parts.filter((p, i) => i === 0 || !/^0\D/.test(p)).join(' ');
  return (neg ? '-' : '') + text;
}

/** Time to go: "—" for null (nothing to do or not scheduled), "now" for 0 or less. */
export function eta(ms) {
  if (missing(ms)) return DASH;
  if (ms <= 0) return 'now';
  if (ms < 1000) return '<1s';
  return duration(ms);
}

/** Byte counts in binary units: "512 B", "1.5 KiB", "12 MiB". */
export function bytes(n) {
  if (missing(n)) return DASH;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Math.abs(n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  const text = i === 0 ? String(Math.round(v)) : v >= 100 ? v.toFixed(0) : v.toFixed(1);
  return (n < 0 ? '-' : '') + text + ' ' + units[i];
}

// One formatter for every number: Number.prototype.toLocaleString with a locale builds a new
// Intl.NumberFormat on each call, which the profile of a first render showed as its costliest
// function (issue 14, point 7: docs/benchmarks.md, "Admin SPA long tasks").
const NUMBER = new Intl.NumberFormat('en-US');

/** A per-minute rate: "12.3/min". */
export function rate(perMinute) {
  if (missing(perMinute)) return DASH;
  const v = Number(perMinute);
  const text = v >= 1000 ? NUMBER.format(Math.round(v)) : (Math.round(v * 10) / 10).toFixed(1);
  return text + '/min';
}

/** An integer with thousands separators. */
export function number(n) {
  if (missing(n)) return DASH;
  return NUMBER.format(Number(n));
}

/** part/whole as a percentage: "42%", "99.5%". */
export function percent(part, whole) {
  if (missing(part) || missing(whole) || whole <= 0) return DASH;
  const p = (part / whole) * 100;
  if (p > 0 && p < 1) return '<1%';
  if (p < 100 && p > 99) return p.toFixed(1) + '%';
  return Math.floor(p) + '%';
}

function parse(iso) {
  if (missing(iso) || iso === '') return null;
  const t = iso instanceof Date ? iso.getTime() : Date.parse(iso);
  return Number.isNaN(t) ? null : t;
}

/** A time relative to now: "in 3m", "5s ago", "now". `now` may be passed for tests. */
export function relative(iso, now = Date.now()) {
  const t = parse(iso);
  if (t === null) return DASH;
  const diff = t - now;
  const abs = Math.abs(diff);
  if (abs < 1000) return 'now';
  let text;
  if (abs < 60_000) text = Math.floor(abs / 1000) + 's';
  else if (abs < 3_600_000) text = Math.floor(abs / 60_000) + 'm';
  else if (abs < 86_400_000) {
    const h = Math.floor(abs / 3_600_000);
    const m = Math.floor((abs % 3_600_000) / 60_000);
    text = h + 'h' + (h < 10 && m ? ' ' + m + 'm' : '');
  } else text = Math.floor(abs / 86_400_000) + 'd';
  return diff > 0 ? 'in ' + text : text + ' ago';
}

const pad = (n) => String(n).padStart(2, '0');

/** An absolute local time, "2025-03-01 14:05:09"; with {utc:true} in UTC with a Z. */
export function time(iso, opts = {}) {
  const t = parse(iso);
  if (t === null) return DASH;
  const d = new Date(t);
  if (opts.utc) {
    return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}Z`;
  }
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A clock time only, "14:05". */
export function clock(iso) {
  const t = parse(iso);
  if (t === null) return DASH;
  const d = new Date(t);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** Milliseconds from now until iso (negative once past); null for a missing time. */
export function until(iso, now = Date.now()) {
  const t = parse(iso);
  return t === null ? null : t - now;
}

/** A countdown "4:05" / "1:02:03" for ms left; "0:00" once past. */
export function countdown(ms) {
  if (missing(ms)) return DASH;
  const s = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return h ? `${h}:${pad(m)}:${pad(sec)}` : `${m}:${pad(sec)}`;
}

export const fmt = { duration, eta, bytes, rate, number, percent, relative, time, clock, until, countdown };
export default fmt;
