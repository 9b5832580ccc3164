// The ctx object handed to every plugin's mount(el, ctx): the same for built-in and operator
// plugins. See docs/plugins.md for the contract.

import * as preact from '../vendor/preact-htm.js';
import { fmt } from './fmt.js';
import { notify } from './toast.js';
import { createPoller } from './poll.js';

export const hooks = Object.freeze({
  useState: preact.useState,
  useReducer: preact.useReducer,
  useEffect: preact.useEffect,
  useLayoutEffect: preact.useLayoutEffect,
  useRef: preact.useRef,
  useMemo: preact.useMemo,
  useCallback: preact.useCallback,
  useContext: preact.useContext,
  useErrorBoundary: preact.useErrorBoundary,
});

/**
 * makeCtx builds one plugin's ctx. `shell` supplies api, user, navigate and the panel's
 * URL helpers. The returned `poller` is the shell's handle to pause polls while the tab is
 * inactive and to stop them all on unmount.
 */
export function makeCtx(plugin, shell) {
  const poller = createPoller();
  const ctx = Object.freeze({
    id: plugin.id,
    title: plugin.title,
    user: shell.user,
    api: shell.api,
    poll: poller.poll,
    fmt,
    notify,
    html: preact.html,
    h: preact.h,
    render: preact.render,
    Component: preact.Component,
    createContext: preact.createContext,
    hooks,
    navigate: shell.navigate,
    params: shell.params,
    path: shell.path,
    setParams: shell.setParams,
    onParams: shell.onParams,
    isActive: poller.isActive,
  });
  return { ctx, poller };
}
