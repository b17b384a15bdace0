/*
 * The kafka-exactly-once operator console: one page, no framework, no dependency, served by the application.
 *
 * Everything a record carries (keys, values, headers, message ids, error texts) is hostile. This file never
 * turns a string into HTML: every element is made with document.createElement and every text goes in through
 * a text node (after its invisible and direction-changing characters are written out as \u{...}), attributes
 * are set by name from this file's own list, and links are only this page's own `#/...` routes. The server's
 * Content-Security-Policy (no inline script, Trusted Types required) holds even if a line here forgot it.
 */
(function () {
  'use strict';

  var settings = JSON.parse(document.querySelector('meta[name="kafka-eo-console"]').getAttribute('content'));
  var TOKEN_KEY = 'kafka-eo-console.token';
  var ACTOR_KEY = 'kafka-eo-console.actor';
  var REASONS = ['decode-failed', 'unknown-schema', 'handler-failed', 'validation-failed', 'output-invalid', 'output-too-large', 'key-parked', 'key-unresolved', 'output-refused'];
  var ACTIONS = ['release', 'replay', 'discard', 'divert', 'abort-transaction'];
  var MAX_CELL = 240;

  // ---- Text: what a record carries, shown as characters an operator can read ----

  /**
   * Whether a character is one an operator could not see or that changes how others read: control characters,
   * bidirectional marks, overrides and isolates, zero-width and other invisible characters, variation selectors,
   * tag characters, lone surrogates.
   */
  function hidden(c) {
    return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c === 0xad || c === 0x34f || c === 0x61c || c === 0x115f || c === 0x1160 || c === 0x17b4 || c === 0x17b5 ||
      (c >= 0x180b && c <= 0x180f) || (c >= 0x200b && c <= 0x200f) || (c >= 0x2028 && c <= 0x202e) || (c >= 0x2060 && c <= 0x206f) || c === 0x3164 ||
      (c >= 0xfe00 && c <= 0xfe0f) || c === 0xfeff || c === 0xffa0 || (c >= 0xfff0 && c <= 0xfffb) || (c >= 0xd800 && c <= 0xdfff) || (c >= 0xe0000 && c <= 0xe0fff);
  }

  /** The text with each such character written out as \u{XXXX} (a newline, tab or return kept in multi-line text). */
  function shown(text, multiline) {
    var value = String(text);
    var out = '';
    for (var i = 0; i < value.length; i++) {
      var c = value.charCodeAt(i);
      var width = 1;
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < value.length) {
        var low = value.charCodeAt(i + 1);
        if (low >= 0xdc00 && low <= 0xdfff) {
          c = (c - 0xd800) * 0x400 + (low - 0xdc00) + 0x10000;
          width = 2;
        }
      }
      if (multiline && (c === 10 || c === 9 || c === 13)) out += value[i];
      else if (!multiline && c === 10) out += '\\n';
      else if (!multiline && c === 9) out += '\\t';
      else if (!multiline && c === 13) out += '\\r';
      else if (hidden(c)) out += '\\u{' + c.toString(16).toUpperCase().padStart(4, '0') + '}';
      else out += value.substr(i, width);
      i += width - 1;
    }
    return out;
  }

  function cut(text, max) {
    var value = text === null || text === undefined ? '' : String(text);
    return value.length > max ? value.slice(0, max) + '… (' + value.length.toLocaleString('en-US') + ' characters)' : value;
  }

  // ---- Elements ----

  var ATTRIBUTES = ['class', 'id', 'type', 'name', 'value', 'placeholder', 'title', 'for', 'role', 'colspan', 'autocomplete', 'required', 'disabled', 'selected', 'checked', 'rows', 'spellcheck', 'aria-label', 'aria-live', 'data-testid', 'data-state', 'data-page', 'minlength', 'maxlength'];

  /** An element: props are this file's (a listener, a `#/` link, a listed attribute), children texts or nodes. */
  function el(tag, props) {
    var node = document.createElement(tag);
    var keys = Object.keys(props || {});
    for (var i = 0; i < keys.length; i++) {
      var name = keys[i];
      var value = props[name];
      if (value === undefined || value === null || value === false) continue;
      if (name === 'onclick' || name === 'onsubmit' || name === 'onchange' || name === 'oninput') {
        node.addEventListener(name.slice(2), value);
      } else if (name === 'href') {
        if (typeof value !== 'string' || value.slice(0, 2) !== '#/') throw new Error('only the console\'s own routes are links');
        node.setAttribute('href', value);
      } else if (ATTRIBUTES.indexOf(name) >= 0) {
        node.setAttribute(name, value === true ? '' : shown(value));
      } else {
        throw new Error('attribute not allowed: ' + name);
      }
    }
    append(node, Array.prototype.slice.call(arguments, 2));
    return node;
  }

  function append(node, children) {
    for (var i = 0; i < children.length; i++) {
      var child = children[i];
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) append(node, child);
      else if (child instanceof Node) node.appendChild(child);
      else node.appendChild(document.createTextNode(shown(child, node.tagName === 'PRE' || node.localName === 'title')));
    }
  }

  /** Replaces a node's children (null and false left out, texts as text nodes). */
  function fill(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    append(node, Array.prototype.slice.call(arguments, 1));
    return node;
  }

  /**
   * A text that came from a record: whole when short; else cut, with the whole text one click away (written into
   * the page only when asked for, so that a megabyte costs nothing until then). The style sheet wraps both to the
   * page's width.
   */
  function cell(text, max) {
    if (text === null || text === undefined || text === '') return el('span', { class: 'muted' }, '–');
    var value = String(text);
    var limit = max || MAX_CELL;
    if (value.length <= limit) return el('span', null, value);
    var whole = el('div', { class: 'whole', 'data-testid': 'whole-text' });
    var more = el('span', { class: 'more' }, 'show all');
    return el('details', { class: 'long' }, el('summary', { onclick: function () {
      if (!whole.firstChild) fill(whole, value);
      more.textContent = more.textContent === 'show all' ? 'show less' : 'show all';
    } }, cut(value, limit), ' ', more), whole);
  }

  function link(route, text) {
    return el('a', { href: route }, text);
  }

  function route(path, query) {
    var parts = [];
    var keys = Object.keys(query || {});
    for (var i = 0; i < keys.length; i++) {
      var v = query[keys[i]];
      if (v !== undefined && v !== null && v !== '') parts.push(encodeURIComponent(keys[i]) + '=' + encodeURIComponent(v));
    }
    return '#/' + path + (parts.length ? '?' + parts.join('&') : '');
  }

  /** A parked key's page, named by its digest: whatever bytes the key holds, the address says which it is. */
  function keyRoute(topic, digest) {
    return route('parked/' + enc(topic) + '/' + enc('sha256:' + digest));
  }

  function badge(state) {
    var value = state === null || state === undefined ? 'unknown' : String(state);
    return el('span', { class: 'badge badge-' + value.replace(/[^a-z]+/gi, '-').toLowerCase(), 'data-state': value }, value);
  }

  function table(columns, rows, options) {
    options = options || {};
    if (rows.length === 0) return el('p', { class: 'empty' }, options.empty || 'Nothing here.');
    var head = el('tr', null, columns.map(function (c) { return el('th', null, c.title); }));
    var body = [];
    rows.forEach(function (row) {
      body.push(el('tr', { class: options.rowClass ? options.rowClass(row) : null }, columns.map(function (c) {
        var value = c.render ? c.render(row) : row[c.key];
        return el('td', { class: c.numeric ? 'num' : null }, value instanceof Node ? value : cell(value, c.max));
      })));
      if (options.after) {
        var extra = options.after(row);
        if (extra) body.push(el('tr', { class: 'detail-row' }, el('td', { colspan: String(columns.length) }, extra)));
      }
    });
    return el('div', { class: 'table-wrap' }, el('table', { 'data-testid': options.testid }, el('thead', null, head), el('tbody', null, body)));
  }

  function fields(pairs) {
    return el('dl', { class: 'fields' }, pairs.filter(Boolean).map(function (p) {
      return [el('dt', null, p[0]), el('dd', null, p[1] instanceof Node ? p[1] : cell(p[1], 2000))];
    }));
  }

  function section(title) {
    return el('section', { class: 'card' }, el('h2', null, title), Array.prototype.slice.call(arguments, 1));
  }

  function pre(text, testid) {
    return el('pre', { class: 'value', 'data-testid': testid }, text);
  }

  // ---- Formatting ----

  function number(n) {
    return n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US');
  }

  /** A count the API stopped at its cap (named in the document's `atLeast`): "10,000+". */
  function capped(document, name) {
    return number(document[name]) + (document.atLeast && document.atLeast[name] ? '+' : '');
  }

  function ago(iso) {
    if (!iso) return '–';
    var ms = Date.now() - new Date(iso).getTime();
    var future = ms < 0;
    var s = Math.round(Math.abs(ms) / 1000);
    var text = s < 60 ? s + ' s' : s < 3600 ? Math.round(s / 60) + ' min' : s < 86400 ? Math.round(s / 360) / 10 + ' h' : Math.round(s / 8640) / 10 + ' d';
    return future ? 'in ' + text : text + ' ago';
  }

  function time(iso) {
    if (!iso) return el('span', { class: 'muted' }, '–');
    var d = new Date(iso);
    if (isNaN(d.getTime())) return cell(iso);
    var text = d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
    return el('span', { title: iso }, text, el('span', { class: 'muted' }, ' (' + ago(iso) + ')'));
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return '–';
    var s = ms / 1000;
    return s < 1 ? Math.round(ms) + ' ms' : s < 120 ? Math.round(s * 10) / 10 + ' s' : Math.round(s / 60) + ' min';
  }

  function bytes(n) {
    if (n === null || n === undefined) return '–';
    return n < 1024 ? n + ' B' : n < 1048576 ? Math.round(n / 102.4) / 10 + ' KiB' : Math.round(n / 104857.6) / 10 + ' MiB';
  }

  function errorText(error) {
    return error ? (error.name ? error.name + ': ' : '') + (error.message || '') : null;
  }

  // ---- The session: the token lives in this tab's sessionStorage, never in a URL ----

  var session = {
    token: function () { return sessionStorage.getItem(TOKEN_KEY); },
    actor: function () { return sessionStorage.getItem(ACTOR_KEY) || 'console'; },
    signIn: function (token, actor) {
      sessionStorage.setItem(TOKEN_KEY, token);
      sessionStorage.setItem(ACTOR_KEY, actor);
    },
    signOut: function () {
      sessionStorage.removeItem(TOKEN_KEY);
    },
  };

  function ApiError(status, message, body) {
    this.status = status;
    this.message = message;
    this.body = body;
  }

  /**
   * The admin API's address, or null when it is not a path of this page's own origin: the server writes it from
   * the address the page was asked for, and a path that starts with `//` is, to a browser, another host's
   * (`//host/kafka-eo/`). The page then sends no request at all, so no token ever leaves for another host, whatever
   * the Content-Security-Policy would have stopped.
   */
  function apiBaseOf(address) {
    var url;
    try {
      url = new URL(address, location.href);
    } catch (e) {
      return null;
    }
    if (url.origin !== location.origin || /^[/\\]{2}/.test(url.pathname) || url.search || url.hash) return null;
    return url;
  }

  var API_BASE = apiBaseOf(settings.api);
  var OFF_ORIGIN = 'The address this console was given for its API is not on this page\'s origin: the console sends no request, and so no token, to it. Open the console at the address the application serves it at.';

  /**
   * The address of a request to the admin API, or null when the path would leave it. Paths are built from the
   * API's own route names and encodeURIComponent'ed parts, but a part can come from the address bar (a crafted
   * link): an empty part, `.` or `..` (which the browser also reads in `%2e` spellings) would make the browser
   * resolve the address elsewhere, with the token. So the path must be non-empty parts only, and the address,
   * written whole from this page's origin (never resolved as a relative one), must be on this origin, under the
   * API's path, exactly as written.
   */
  function apiUrl(path) {
    if (!API_BASE) return null;
    var q = path.indexOf('?');
    var pathname = q >= 0 ? path.slice(0, q) : path;
    var parts = pathname.split('/');
    for (var i = 0; i < parts.length; i++) {
      if (parts[i] === '' || /^(\.|%2e){1,2}$/i.test(parts[i]) || /[^A-Za-z0-9%._~!*'()-]/.test(parts[i])) return null;
    }
    var url = new URL(location.origin + API_BASE.pathname + path);
    if (url.origin !== location.origin || url.pathname !== API_BASE.pathname + pathname) return null;
    return url;
  }

  /** One request to the admin API, with the token (or the application's own credentials, under its guard). */
  function api(path, options) {
    options = options || {};
    if (!API_BASE) return Promise.reject(new ApiError(0, OFF_ORIGIN, null));
    var url = apiUrl(path);
    if (!url) return Promise.reject(new ApiError(400, 'This address names no record the console can look up (an empty part, "." or ".."): the console sends no request for it.', null));
    var headers = { Accept: 'application/json' };
    if (options.body !== undefined) headers['Content-Type'] = 'application/json';
    if (settings.auth === 'token' && session.token()) headers.Authorization = 'Bearer ' + session.token();
    return fetch(url.href, {
      method: options.method || 'GET',
      headers: headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      credentials: 'same-origin',
      cache: 'no-store',
      redirect: 'error',
    }).then(function (response) {
      return response.text().then(function (text) {
        var data = null;
        try {
          data = text ? JSON.parse(text) : null;
        } catch (e) {
          data = { message: text.slice(0, 500) };
        }
        if (response.status === 401 && settings.auth === 'token') {
          session.signOut();
          throw new ApiError(401, 'Sign in: the token was refused.', data);
        }
        // 202 (still queued) and 422 (carried out and failed) answer an action with its operation.
        if (!response.ok && response.status !== 422) throw new ApiError(response.status, (data && data.message) || 'HTTP ' + response.status, data);
        return { status: response.status, data: data };
      });
    });
  }

  function get(path, query) {
    var parts = [];
    Object.keys(query || {}).forEach(function (k) {
      var v = query[k];
      if (v !== undefined && v !== null && v !== '') parts.push(encodeURIComponent(k) + '=' + encodeURIComponent(v));
    });
    return api(path + (parts.length ? '?' + parts.join('&') : '')).then(function (r) { return r.data; });
  }

  function act(path, body) {
    var payload = Object.assign({}, body);
    if (!settings.actorFromApplication) payload.actor = session.actor();
    return api(path, { method: 'POST', body: payload });
  }

  var enc = encodeURIComponent;

  // ---- Layout ----

  var app = document.getElementById('app');
  var main;
  var refreshTimer;
  var generation = 0;

  var NAV = [
    ['overview', 'Overview'],
    ['parked', 'Parked keys'],
    ['dead-letters', 'Dead letters'],
    ['charts', 'Charts'],
    ['retries', 'Retry tiers'],
    ['outbox', 'Outbox'],
    ['transactions', 'Transactions'],
    ['story', 'Message story'],
    ['audit', 'Audit'],
    ['bulk', 'Bulk actions'],
  ];

  function layout(current) {
    var search = el('input', { type: 'search', name: 'q', placeholder: 'Message id or key', 'aria-label': 'Message id or key', autocomplete: 'off', spellcheck: 'false' });
    var header = el('header', { class: 'top' },
      el('a', { href: '#/overview', class: 'brand' }, 'kafka-exactly-once'),
      el('nav', null, NAV.map(function (n) { return el('a', { href: '#/' + n[0], class: n[0] === current ? 'current' : null }, n[1]); })),
      el('form', { class: 'search', role: 'search', onsubmit: function (e) {
        e.preventDefault();
        // A key may begin or end with spaces: only a message id is trimmed (as the story's own form does).
        if (search.value.trim()) location.hash = route('story', { find: search.value });
      } }, search),
      settings.auth === 'token' ? el('button', { type: 'button', class: 'link', onclick: function () { session.signOut(); render(); } }, 'Sign out') : null);
    main = el('main', { 'data-page': current });
    fill(app, header, main);
    return main;
  }

  function status(message, kind) {
    return el('div', { class: 'status status-' + (kind || 'info'), role: 'status', 'aria-live': 'polite' }, message);
  }

  function failed(err) {
    var shownError = status(err instanceof ApiError ? err.message : 'The console could not load this page: ' + (err && err.message), 'error');
    shownError.setAttribute('data-testid', 'page-error');
    fill(main, shownError);
    if (err instanceof ApiError && err.status === 401) render();
  }

  // ---- A confirmation that says what will happen ----

  function confirmAction(title, explanation, button, options) {
    options = options || {};
    return new Promise(function (resolve) {
      var reason = options.reason ? el('textarea', { name: 'reason', rows: '3', placeholder: options.reason, required: options.reasonRequired, maxlength: '1000' }) : null;
      var error = el('p', { class: 'form-error' });
      function close(value) {
        overlay.remove();
        resolve(value);
      }
      var confirm = el('button', { type: 'submit', class: options.danger ? 'danger' : 'primary' }, button);
      var form = el('form', { class: 'modal', role: 'dialog', 'aria-label': title, onsubmit: function (e) {
        e.preventDefault();
        var text = reason ? reason.value.trim() : '';
        if (options.reasonRequired && !text) {
          error.textContent = 'A reason is required: it is kept in the audit log.';
          return;
        }
        close({ reason: text || undefined });
      } },
      el('h2', null, title),
      explanation.map(function (p) { return el('p', null, p); }),
      reason ? el('label', null, options.reasonRequired ? 'Reason (required)' : 'Reason (optional)', reason) : null,
      error,
      el('div', { class: 'buttons' }, el('button', { type: 'button', onclick: function () { close(null); } }, 'Cancel'), confirm));
      var overlay = el('div', { class: 'overlay' }, form);
      document.body.appendChild(overlay);
      (reason || confirm).focus();
    });
  }

  /** Follows an operation the consumer carries out until it is done or failed (or a minute passed). */
  function follow(box, entry, then) {
    var started = Date.now();
    function show(e) {
      fill(box, operationBox(e));
      if (e.state === 'done' || e.state === 'failed' || Date.now() - started > 60000) {
        if (then) then(e);
        return;
      }
      setTimeout(function () {
        get('operations/' + enc(e.id)).then(show, function (err) { fill(box, status(err.message, 'error')); });
      }, 1000);
    }
    show(entry);
  }

  function operationBox(e) {
    var kind = e.state === 'done' ? 'ok' : e.state === 'failed' ? 'error' : 'info';
    var what = e.state === 'pending' ? 'queued for the group\'s consumer' : e.state === 'running' ? 'being carried out by the group\'s consumer' : e.state;
    return el('div', { class: 'status status-' + kind, 'data-testid': 'operation', 'data-state': e.state },
      'Operation ' + e.id + ' (' + e.action + (e.key ? ' of key ' + cut(e.key, 120) : '') + '): ' + what,
      e.result ? el('pre', { class: 'value' }, JSON.stringify(e.result, null, 2)) : null);
  }

  // ---- Records: keys, headers, values ----

  function bytesView(v) {
    if (!v) return el('span', { class: 'muted' }, 'none');
    if (v.text !== null) return el('span', { class: 'mono' }, cell(v.text, 2000), v.hex ? el('span', { class: 'muted' }, ' (' + bytes(v.bytes) + ')') : null);
    return el('span', { class: 'mono' }, el('span', { class: 'muted' }, 'not text, ' + bytes(v.bytes) + ': '), (v.hex || '') + (v.bytes > 256 ? '…' : ''));
  }

  function headersTable(headers) {
    return table([
      { title: 'Header', render: function (h) { return el('span', { class: 'mono' }, cell(h.name, 200)); } },
      { title: 'Value', render: function (h) { return h.null ? el('span', { class: 'muted' }, 'null') : bytesView(h); } },
    ], headers, { empty: 'No headers.', testid: 'headers' });
  }

  function valueView(v) {
    if (!v || v.bytes === null) return el('p', { class: 'muted' }, 'No value (a tombstone).');
    return el('div', { class: 'record-value' },
      el('p', { class: 'muted' }, bytes(v.bytes) + ', ' + v.framing + (v.schema ? ', written with ' + v.schema : '')),
      v.decoded !== null ? pre(v.decoded + (v.truncated ? '\n… (cut: the value is larger)' : ''), 'decoded-value') : null,
      v.error ? status('Not decoded: ' + v.error, 'warn') : null,
      v.text !== undefined ? [el('p', { class: 'muted' }, 'As text:'), pre(v.text, 'value-text')] : null,
      v.decoded === null ? el('details', null, el('summary', null, 'First bytes (hex)'), pre(v.hex.replace(/(..)/g, '$1 ').trim(), 'value-hex')) : null);
  }

  // ---- Sign in ----

  function signInPage(message) {
    layoutSignedOut();
    var token = el('input', { type: 'password', name: 'token', autocomplete: 'off', required: true, 'aria-label': 'Admin token' });
    var actor = el('input', { type: 'text', name: 'actor', autocomplete: 'off', maxlength: '200', value: sessionStorage.getItem(ACTOR_KEY) || '', 'aria-label': 'Your name', placeholder: 'e.g. jane (recorded with every action)' });
    var error = el('p', { class: 'form-error' }, message || '');
    main.appendChild(el('form', { class: 'card signin', onsubmit: function (e) {
      e.preventDefault();
      session.signIn(token.value, actor.value.trim() || 'console');
      api('overview').then(function () { render(); }, function (err) {
        error.textContent = err.status === 401 ? 'This token is refused.' : err.message;
      });
    } },
    el('h2', null, 'Sign in'),
    el('p', null, 'The admin token of this application (the one its admin API takes). It stays in this browser tab only, and is sent to this application only.'),
    el('label', null, 'Token', token),
    el('label', null, 'Your name', actor),
    error,
    el('div', { class: 'buttons' }, el('button', { type: 'submit', class: 'primary' }, 'Sign in'))));
    token.focus();
  }

  function layoutSignedOut() {
    main = el('main', { 'data-page': 'sign-in' });
    fill(app, el('header', { class: 'top' }, el('span', { class: 'brand' }, 'kafka-exactly-once')), main);
  }

  // ---- Overview ----

  function overviewPage(own) {
    return get('overview').then(function (o) {
      if (own !== generation) return;
      // null while PostgreSQL cannot be read (o.unreadable.counts says why): the tiles show a dash.
      var counts = o.counts || {};
      // The whole group from the instances' reports; this instance alone when they are off or not read.
      var groupTotals = o.instances && o.instances.length ? o.groupTotals : null;
      var totals = groupTotals || o.totals;
      var partitions = groupTotals ? o.groupPartitions : o.partitions;
      var instanceNames = {};
      (o.instances || []).forEach(function (i, n) { instanceNames[i.instanceId] = i.self ? 'this instance' : '#' + (n + 1) + ' ' + i.host + ' (pid ' + i.pid + ')'; });
      var tiles = el('div', { class: 'tiles' },
        tile('Consumer', badge(o.consumer.state), o.consumer.state === 'running' && o.consumer.lastError ? 'recovered from: ' + cut(o.consumer.lastError, 160) : null),
        groupTotals ? tile('Instances', link('#/overview', number(groupTotals.instances)), groupTotals.silent ? number(groupTotals.silent) + ' no longer reporting' : 'reporting', groupTotals.silent > 0 ? 'bad' : null) : null,
        tile('Lag', number(totals.lag), groupTotals ? 'records still to handle, whole group' : 'records still to handle'),
        tile('Records/s', number(totals.recordsPerSecond), 'over the last minute'),
        tile('Stalled', number(totals.stalled), 'partitions', totals.stalled > 0 ? 'bad' : null),
        tile('Parked keys', link('#/parked', capped(counts, 'parkedKeys')), capped(counts, 'parkedRecords') + ' records wait', counts.parkedKeys > 0 ? 'warn' : null),
        tile('Dead letters', link('#/dead-letters', capped(counts, 'deadLetters')), 'not replayed'),
        tile('On retry tiers', link('#/retries', capped(counts, 'retrying')), 'records waiting'));
      var health = Object.keys(o.health).map(function (k) {
        var h = o.health[k];
        return el('div', { class: 'health-item' }, el('strong', null, k), ' ', badge(h.status), h.message ? el('span', { class: 'muted' }, ' ' + cut(h.message, 600)) : null);
      });
      var group = o.group;
      fill(main, 
        el('div', { class: 'page-head' }, el('h1', null, 'Group ', el('span', { class: 'mono' }, group.id)), el('span', { class: 'muted refreshed' }, 'updated ' + new Date(o.generatedAt).toLocaleTimeString('en-GB') + ', every ' + settings.refreshMs / 1000 + ' s')),
        consumerBanner(o.consumer),
        unreadableBanner(o.unreadable),
        tiles,
        section('Health', health.length ? health : el('p', { class: 'muted' }, 'No indicator.')),
        groupTotals ? section('Instances of the group', instancesTable(o.instances)) : null,
        section(groupTotals ? 'Partitions of the group' : 'Partitions of this instance', table([
          { title: 'Partition', render: function (p) { return link(route('charts', { topic: p.topic, partition: p.partition }), p.topic + '[' + p.partition + ']'); } },
          groupTotals ? { title: 'Instance', render: function (p) { return el('span', { class: p.instanceStatus === 'reporting' ? null : 'bad-text' }, instanceNames[p.instanceId] || p.instanceId, p.instanceStatus === 'reporting' ? '' : ' (' + p.instanceStatus + ')'); } } : null,
          { title: 'Activity', render: function (p) { return badge(p.view.state); } },
          { title: 'Committed', key: 'committedOffset', numeric: true },
          { title: 'Lag', render: function (p) { return number(p.lag); }, numeric: true },
          { title: 'Records/s', render: function (p) { return number(p.recordsPerSecond); }, numeric: true },
          { title: 'Units/s', render: function (p) { return number(p.unitsPerSecond); }, numeric: true },
          { title: 'Commit', render: function (p) { return p.commitLatencyMs === null ? '–' : duration(p.commitLatencyMs); }, numeric: true },
          { title: 'Last commit', render: function (p) { return time(p.lastCommitAt); } },
        ].filter(Boolean), partitions.slice().sort(function (a, b) { return a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition; }), {
          empty: groupTotals ? 'No instance reports a partition (yet).' : 'This instance is assigned no partition (yet).',
          testid: 'partitions',
          rowClass: function (p) { return p.stalled || (p.instanceStatus && p.instanceStatus !== 'reporting') ? 'row-bad' : null; },
          after: function (p) {
            if (!p.view.reason && !p.view.wayOut) return null;
            return el('div', { class: 'why' }, p.view.reason ? el('div', null, cut(p.view.reason, 1200)) : null, p.view.wayOut ? el('div', null, el('strong', null, 'Way out: '), p.view.wayOut) : null);
          },
        })),
        section('Members of the group', group.error ? status(group.error, 'warn') : null, fields([['Kafka\'s state', group.state]]), table([
          { title: 'Client', key: 'clientId' },
          { title: 'Host', key: 'host' },
          { title: 'Instance', render: function (m) { return m.instanceId ? instanceNames[m.instanceId] || m.instanceId : el('span', { class: 'muted' }, 'reports nothing'); } },
          { title: 'Partitions', render: function (m) { return Object.keys(m.assignment).map(function (t) { return t + ' ' + m.assignment[t].join(','); }).join('; '); } },
          { title: 'Member', key: 'memberId', max: 60 },
        ], group.members, { empty: 'No member.' })),
        o.retryTiers.length ? section('Retry tiers', tiersTable(o.retryTiers)) : null,
        section('Publisher', o.publisher ? fields([
          ['Circuit breaker', badge(o.publisher.breaker)],
          ['Spool', number(o.publisher.spool.records) + ' records, ' + bytes(o.publisher.spool.bytes) + (o.publisher.spool.records ? ', oldest ' + duration(o.publisher.spool.oldestAgeMs) : '')],
          ['Sent / spooled / drained', number(o.publisher.sent) + ' / ' + number(o.publisher.spooled) + ' / ' + number(o.publisher.drained)],
          ['Set aside (quarantined)', number(o.publisher.quarantined) + (o.publisher.lastQuarantineReason ? ': ' + o.publisher.lastQuarantineReason : '')],
        ]) : el('p', { class: 'muted' }, 'This application has no publisher (module option "publisher").')),
        section('Outbox', o.outbox ? outboxFields(o.outbox) : el('p', { class: 'muted' }, 'This database has no outbox.')));
      scheduleRefresh(own);
    });
  }

  /** The group's instances from their reports: which reports, which went silent, each one's process. */
  function instancesTable(instances) {
    return table([
      { title: 'Instance', render: function (i) { return el('span', null, el('span', { class: 'mono' }, i.instanceId), i.self ? el('span', { class: 'muted' }, ' (this one)') : null); } },
      { title: 'Report', render: function (i) { return el('span', null, badge(i.status), ' ', i.status === 'stopped' ? 'stopped ' + ago(i.stoppedAt) : 'last ' + duration(i.reportAgeMs) + ' ago'); } },
      { title: 'Consumer', render: function (i) { return el('span', null, badge(i.consumer.state), i.consumer.lastError ? el('span', { class: 'muted' }, ' ' + cut(i.consumer.lastError, 200)) : null); } },
      { title: 'In Kafka\'s group', render: function (i) { return i.inGroup ? 'yes' : el('span', { class: i.status === 'reporting' ? 'bad-text' : 'muted' }, 'no'); } },
      { title: 'Partitions', render: function (i) { return number(i.partitions.length); }, numeric: true },
      { title: 'Lag', render: function (i) { return number(i.partitions.reduce(function (n, p) { return n + (p.lag || 0); }, 0)); }, numeric: true },
      { title: 'Memory (RSS)', render: function (i) { return bytes(i.memory.rssBytes); }, numeric: true },
      { title: 'Event loop p99', render: function (i) { return duration(i.eventLoopDelayMs.p99); }, numeric: true },
      { title: 'Version', render: function (i) { return i.version + ' (Node.js ' + i.node + ')'; } },
      { title: 'Host', render: function (i) { return i.host + ' pid ' + i.pid; } },
    ], instances, { testid: 'instances', rowClass: function (i) { return i.status === 'silent' ? 'row-bad' : null; } });
  }

  /**
   * What the consumer's state calls for now. Its last error stays in the document after the consumer recovered
   * (a coordinator that was loading at the first join): a running consumer gets no banner, that error is only a
   * note beside its state; one that is starting or rebalancing gets a warning; one crashed or stopped, a red one.
   */
  function consumerBanner(consumer) {
    if (consumer.state === 'running' || consumer.state === 'idle') return null;
    var bad = consumer.state === 'crashed' || consumer.state === 'stopped';
    if (!bad && !consumer.lastError) return null;
    var banner = status('The consumer is ' + consumer.state + (consumer.lastError ? '; its last error: ' + cut(consumer.lastError, 600) : '') + '.', bad ? 'error' : 'warn');
    banner.setAttribute('data-testid', 'consumer-banner');
    return banner;
  }

  /** The parts of the overview the database could not give (PostgreSQL away): said, the rest shown as it is. */
  function unreadableBanner(unreadable) {
    var parts = Object.keys(unreadable || {});
    if (!parts.length) return null;
    var banner = status('Not read from PostgreSQL: ' + parts.map(function (k) { return k + ' (' + cut(unreadable[k], 300) + ')'; }).join('; ') + '. Partitions, members and health are shown as they are now.', 'warn');
    banner.setAttribute('data-testid', 'unreadable-banner');
    return banner;
  }

  function tile(title, value, note, tone) {
    var testid = 'tile-' + title.toLowerCase().replace(/[^a-z]+/g, '-');
    return el('div', { class: 'tile' + (tone ? ' tile-' + tone : '') }, el('div', { class: 'tile-title' }, title), el('div', { class: 'tile-value', 'data-testid': testid }, value), note ? el('div', { class: 'muted' }, note) : null);
  }

  function scheduleRefresh(own) {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(function () {
      if (own !== generation) return;
      if (document.hidden) return scheduleRefresh(own);
      overviewPage(own).catch(function (err) {
        if (own === generation) {
          // One banner for the latest failure (the next refresh that succeeds replaces the page, and it with it).
          var previous = main.querySelector('[data-testid=refresh-failed]');
          if (previous) previous.remove();
          var banner = status('Refresh failed at ' + new Date().toLocaleTimeString('en-GB') + ': ' + err.message + ' (trying again)', 'error');
          banner.setAttribute('data-testid', 'refresh-failed');
          main.insertBefore(banner, main.firstChild);
          scheduleRefresh(own);
        }
      });
    }, settings.refreshMs);
  }

  function tiersTable(tiers) {
    return table([
      { title: 'Tier topic', render: function (t) { return el('span', { class: 'mono' }, t.topic); } },
      { title: 'Retries of', key: 'retriesOf' },
      { title: 'Tier', key: 'tier', numeric: true },
      { title: 'Delay', render: function (t) { return duration(t.delayMs); }, numeric: true },
      { title: 'Waiting', render: function (t) { return number(t.waiting); }, numeric: true },
      { title: 'Next due', render: function (t) { return time(t.nextDueAt); } },
    ], tiers, { testid: 'tiers' });
  }

  function outboxFields(s) {
    return fields([
      ['Waiting', capped(s, 'waiting') + (s.waiting ? ', the oldest written ' + ago(s.oldestWrittenAt) : '')],
      ['Relayed', number(s.relayed) + ' events (batch ' + s.relayedBatch + ' of ' + s.lastBatch + ')'],
      ['Set aside', s.setAside ? link('#/outbox', capped(s, 'setAside') + ' waiting for an operator') : '0'],
      ['Relay lock held by', s.holder ? 'pid ' + s.holder.pid + ' (' + (s.holder.applicationName || 'no application name') + (s.holder.clientAddress ? ' at ' + s.holder.clientAddress : '') + '), connected ' + ago(s.holder.since) : 'no session: no relay runs'],
      s.relay ? ['This instance\'s relay', el('span', null, badge(s.relay.state), s.relay.lastError ? ' ' + cut(s.relay.lastError, 500) : '')] : null,
      ['Relay name', s.relayName],
    ]);
  }

  // ---- Charts: the group's last day, from the instances' samples ----

  var SVG_NS = 'http://www.w3.org/2000/svg';
  var SVG_ATTRIBUTES = ['viewBox', 'width', 'height', 'x', 'y', 'x1', 'y1', 'x2', 'y2', 'points', 'fill', 'fill-opacity', 'stroke', 'stroke-width', 'stroke-dasharray', 'class', 'data-testid', 'data-at', 'role', 'aria-label', 'text-anchor', 'preserveAspectRatio', 'focusable'];
  /**
   * Series are told apart by colour (the Okabe-Ito palette, made for colour-blind readers) and by dash, and each is
   * named in the legend with its own line: no reader needs the colour alone.
   */
  var SERIES_STYLES = [['#0072B2', ''], ['#D55E00', '7 3'], ['#009E73', '2 3'], ['#CC79A7', '9 3 2 3'], ['#E69F00', '12 4'], ['#56B4E9', '3 3 1 3'], ['#000000', '1 3']];
  var RANGES = [['15m', '15 min'], ['1h', '1 h'], ['6h', '6 h'], ['24h', '24 h']];
  var CHART_W = 640;
  var CHART_H = 150;

  /** An SVG element: attributes from SVG_ATTRIBUTES only (numbers computed here, colours from SERIES_STYLES), texts as text. */
  function svg(tag, props) {
    var node = document.createElementNS(SVG_NS, tag);
    var keys = Object.keys(props || {});
    for (var i = 0; i < keys.length; i++) {
      var value = props[keys[i]];
      if (value === undefined || value === null || value === '') continue;
      if (keys[i] === 'onclick') node.addEventListener('click', value);
      else if (SVG_ATTRIBUTES.indexOf(keys[i]) >= 0) node.setAttribute(keys[i], String(value));
      else throw new Error('attribute not allowed: ' + keys[i]);
    }
    append(node, Array.prototype.slice.call(arguments, 2));
    return node;
  }

  function clock(ms) {
    return new Date(ms).toISOString().slice(11, 19);
  }

  /**
   * A line chart over the range: one line per series (a step no instance reported in is a gap, not a zero), the
   * highest value at the top, the range's start and end below. Each step is a target: its title lists every
   * series' value, and a click opens what `link(at, stepMs)` names (the records of that moment), when it names one.
   * `gapMs`: how far apart two points may be and still be joined (a step by default; the outbox's backlog is read
   * every 30 s by an instance without a relay).
   */
  function chart(title, testid, doc, series, format, link, gapMs) {
    var from = new Date(doc.from).getTime();
    var to = new Date(doc.to).getTime();
    var stepMs = doc.stepSeconds * 1000;
    var max = 0;
    series.forEach(function (s) { s.points.forEach(function (p) { if (p.value !== null && p.value > max) max = p.value; }); });
    var top = max > 0 ? max : 1;
    var x = function (at) { return Math.round(((at - from) / (to - from)) * CHART_W * 10) / 10; };
    var y = function (v) { return Math.round((CHART_H - (v / top) * (CHART_H - 6)) * 10) / 10; };
    var lines = [];
    var steps = {};
    series.forEach(function (s, n) {
      var style = SERIES_STYLES[n % SERIES_STYLES.length];
      var run = [];
      var flush = function () {
        if (run.length === 1) lines.push(svg('line', { x1: run[0][0], y1: run[0][1], x2: run[0][0] + 2, y2: run[0][1], stroke: style[0], 'stroke-width': 3 }));
        else if (run.length > 1) lines.push(svg('polyline', { points: run.map(function (p) { return p.join(','); }).join(' '), fill: 'none', stroke: style[0], 'stroke-width': 2, 'stroke-dasharray': style[1] }));
        run = [];
      };
      var previous = null;
      s.points.forEach(function (p) {
        var at = new Date(p.at).getTime();
        if (previous !== null && at - previous > Math.max(stepMs, gapMs || 0)) flush();
        previous = at;
        (steps[at] = steps[at] || []).push(s.label + ': ' + (p.value === null ? '–' : format(p.value)));
        if (p.value === null) return flush();
        run.push([x(at + stepMs / 2), y(p.value)]);
      });
      flush();
    });
    var targets = Object.keys(steps).map(function (key) {
      var at = Number(key);
      var target = link ? link(at, stepMs) : null;
      return svg('rect', {
        x: x(at), y: 0, width: Math.max(1, Math.round((stepMs / (to - from)) * CHART_W * 10) / 10), height: CHART_H, fill: '#1f2933', 'fill-opacity': 0, class: target ? 'step step-link' : 'step', 'data-at': new Date(at).toISOString(),
        onclick: target ? function () { location.hash = target; } : null,
      }, svg('title', null, clock(at) + '–' + clock(at + stepMs) + ' UTC\n' + steps[key].join('\n') + (target ? '\n(click: the records of this moment)' : '')));
    });
    var grid = [0.25, 0.5, 0.75].map(function (f) { return svg('line', { x1: 0, x2: CHART_W, y1: y(top * f), y2: y(top * f), stroke: '#d9e2ec', 'stroke-width': 1 }); });
    var picture = svg('svg', { viewBox: '0 0 ' + CHART_W + ' ' + CHART_H, class: 'chart', role: 'img', 'aria-label': title, preserveAspectRatio: 'none', focusable: 'false', 'data-testid': testid + '-svg' },
      svg('rect', { x: 0, y: 0, width: CHART_W, height: CHART_H, fill: '#ffffff' }), grid, lines, targets);
    var legend = el('div', { class: 'legend' }, series.map(function (s, n) {
      var style = SERIES_STYLES[n % SERIES_STYLES.length];
      return el('span', { class: 'legend-item' }, svg('svg', { viewBox: '0 0 28 8', width: 28, height: 8, focusable: 'false' }, svg('line', { x1: 0, y1: 4, x2: 28, y2: 4, stroke: style[0], 'stroke-width': 2.5, 'stroke-dasharray': style[1] })), ' ' + s.label);
    }));
    var empty = series.every(function (s) { return s.points.length === 0; });
    return el('div', { class: 'chart-card', 'data-testid': testid },
      el('h3', null, title),
      empty ? el('p', { class: 'empty' }, 'Nothing reported in this range.') : el('div', { class: 'chart-frame' },
        el('div', { class: 'chart-axis muted' }, format(max)),
        picture,
        el('div', { class: 'chart-axis chart-axis-x muted' }, el('span', null, clock(from) + ' UTC'), el('span', null, clock(to) + ' UTC'))),
      empty ? null : legend);
  }

  /**
   * A partition as the group's instances report it now: its owner, activity, last failure and the way out, and
   * one click to the record at its committed offset (the next to handle: the one a stall is stuck on), its dead
   * letters and its story.
   */
  function partitionNow(o, topic, partition) {
    var all = (o.instances && o.instances.length ? o.groupPartitions : o.partitions) || [];
    var p = all.filter(function (x) { return x.topic === topic && x.partition === partition; })[0];
    if (!p) return section('This partition now', el('p', { class: 'muted', 'data-testid': 'partition-now' }, 'No instance reports this partition now.'));
    var owner = (o.instances || []).filter(function (i) { return i.instanceId === p.instanceId; })[0];
    return section('This partition now', el('div', { 'data-testid': 'partition-now' }, fields([
      ['Instance', owner ? el('span', null, el('span', { class: 'mono' }, owner.instanceId), ' ', badge(owner.status)) : 'this instance'],
      ['Activity', el('span', null, badge(p.view.state), p.view.reason ? ' ' + cut(p.view.reason, 600) : '')],
      p.view.wayOut ? ['Way out', p.view.wayOut] : null,
      ['Last failure', p.lastError ? el('span', null, time(p.lastError.at), ' ', badge(p.lastError.kind), ' ', cell(p.lastError.message, 600)) : 'none since it was assigned'],
      ['Committed', p.committedOffset === null ? '–' : el('span', null, p.committedOffset + ' ', link(route('story', { topic: topic, partition: partition, offset: p.committedOffset }), 'the record there (the next to handle)'))],
      ['Lag', number(p.lag)],
      ['Dead letters', link(route('dead-letters', { topic: topic }), 'of ' + topic)],
    ])));
  }

  /** The values of `read(point)` of each series named `label(series)`. */
  function seriesOf(doc, keep, label, read) {
    return doc.series.filter(keep).map(function (s) {
      return { label: label(s), points: s.points.map(function (p) { return { at: p.at, value: read(p) }; }) };
    });
  }

  function chartsPage(own, query) {
    var range = RANGES.some(function (r) { return r[0] === query.range; }) ? query.range : '1h';
    var one = query.topic && query.partition !== undefined && query.partition !== '';
    // A partition's charts come with where it stands now: who has it, its last failure, the record behind it.
    return Promise.all([get('history', { range: range, topic: query.topic, partition: query.partition }), one ? get('overview') : null]).then(function (both) {
      if (own !== generation) return;
      var doc = both[0];
      var now = both[1] ? partitionNow(both[1], query.topic, Number(query.partition)) : null;
      var tiers = {};
      (doc.retryTiers || []).forEach(function (t) { tiers[t.topic] = t.retriesOf; });
      var isTier = function (s) { return Object.prototype.hasOwnProperty.call(tiers, s.topic); };
      var notTier = function (s) { return !isTier(s); };
      var any = function () { return true; };
      var label = function (s) { return s.partition === null ? s.topic : s.topic + '[' + s.partition + ']'; };
      var perSecond = function (v) { return (Math.round(v * 100) / 100).toLocaleString('en-US') + '/s'; };
      var ms = function (v) { return duration(v); };
      var iso = function (at) { return new Date(at).toISOString(); };
      // The records of a moment: the dead letters of that step (a tier's are its topic's). A record's time in the
      // inbox is its unit of work's start, up to a unit's length before it was counted: the range starts 10 s early.
      var deadLettersAt = function (at, stepMs) { return route('dead-letters', { topic: query.topic ? tiers[query.topic] || query.topic : undefined, from: iso(at - 10000), to: iso(at + stepMs) }); };
      var outboxSeries = [
        { label: 'waiting events', points: doc.outbox.map(function (p) { return { at: p.at, value: p.waiting }; }) },
      ];
      fill(main,
        el('div', { class: 'page-head' },
          el('h1', null, 'The last ', RANGES.filter(function (r) { return r[0] === range; })[0][1], query.topic ? el('span', { class: 'mono' }, ' of ' + query.topic + (query.partition !== undefined ? '[' + query.partition + ']' : '')) : null),
          el('span', { class: 'ranges' }, RANGES.map(function (r) { return r[0] === range ? el('strong', null, r[1]) : link(route('charts', { range: r[0], topic: query.topic, partition: query.partition }), r[1]); })),
          el('span', { class: 'muted' }, 'a point every ' + duration(doc.stepSeconds * 1000) + '; hover a step for its values, click one for its records')),
        filterForm(query, [{ name: 'topic', label: 'Topic' }, { name: 'partition', label: 'Partition' }], function (q) { location.hash = route('charts', Object.assign({ range: range }, q)); }),
        doc.unavailable ? status(doc.unavailable, 'warn') : null,
        now,
        el('div', { class: 'charts' },
          chart('Records applied per second', 'chart-records', doc, seriesOf(doc, notTier, label, function (p) { return p.recordsPerSecond; }), perSecond),
          chart('Lag (records still to handle)', 'chart-lag', doc, seriesOf(doc, notTier, label, function (p) { return p.lag; }), number),
          chart('Dead letters per step', 'chart-dead-letters', doc, seriesOf(doc, any, label, function (p) { return p.deadLetters; }), number, deadLettersAt),
          chart('Unit of work p99 (claim to Kafka commit)', 'chart-p99', doc, seriesOf(doc, any, label, function (p) { return p.unitP99Ms; }), ms),
          chart('Unit of work p50', 'chart-p50', doc, seriesOf(doc, any, label, function (p) { return p.unitP50Ms; }), ms),
          chart('Commits per second', 'chart-commits', doc, seriesOf(doc, any, label, function (p) { return p.commitsPerSecond; }), perSecond),
          chart('Keys parked per step', 'chart-parks', doc, seriesOf(doc, any, label, function (p) { return p.parks; }), number, function () { return route('parked', { topic: query.topic }); }),
          chart('Retry tiers: records waiting', 'chart-retry-depth', doc, seriesOf(doc, isTier, label, function (p) { return p.lag; }), number, function () { return route('retries', {}); }),
          chart('Moved to a retry tier per step', 'chart-retry-moves', doc, seriesOf(doc, any, label, function (p) { return p.retryMoves; }), number, function () { return route('retries', {}); }),
          chart('Outbox: events waiting', 'chart-outbox', doc, outboxSeries, number, function () { return route('outbox', {}); }, 40000),
          chart('Outbox: oldest waiting event\'s age', 'chart-outbox-age', doc, [{ label: 'oldest age', points: doc.outbox.map(function (p) { return { at: p.at, value: p.oldestAgeMs }; }) }], ms, null, 40000)));
    });
  }

  // ---- Parked keys ----

  function filterForm(query, inputs, onSubmit) {
    var form = el('form', { class: 'filters', onsubmit: function (e) {
      e.preventDefault();
      var next = {};
      inputs.forEach(function (i) { next[i.name] = form.elements[i.name].value.trim(); });
      onSubmit(next);
    } }, inputs.map(function (i) {
      var input = i.options
        ? el('select', { name: i.name, 'aria-label': i.label }, el('option', { value: '' }, 'any ' + i.label.toLowerCase()), i.options.map(function (o) { return el('option', { value: o, selected: query[i.name] === o }, o); }))
        : el('input', { type: 'text', name: i.name, value: query[i.name] || '', placeholder: i.label, 'aria-label': i.label, autocomplete: 'off', spellcheck: 'false' });
      return el('label', null, i.label, input);
    }), el('button', { type: 'submit' }, 'Filter'));
    return form;
  }

  function pager(page, path, query) {
    return page.next ? el('p', null, link(route(path, Object.assign({}, query, { after: page.next })), 'Next page →')) : null;
  }

  function parkedListPage(own, query) {
    return get('parked-keys', { topic: query.topic, key: query.key, reason: query.reason, after: query.after }).then(function (page) {
      if (own !== generation) return;
      fill(main, 
        el('h1', null, 'Parked keys'),
        el('p', { class: 'muted' }, 'Keys of @OrderedEvent handlers whose record failed for good: their later records wait, in order, until the key is released.'),
        filterForm(query, [{ name: 'topic', label: 'Topic' }, { name: 'key', label: 'Key' }, { name: 'reason', label: 'Reason', options: REASONS }], function (q) { location.hash = route('parked', q); }),
        table([
          { title: 'Key', render: function (k) { return link(keyRoute(k.topic, k.keyDigest), cut(k.key, 120)); } },
          { title: 'Topic', key: 'topic' },
          { title: 'Reason', render: function (k) { return badge(k.reason); } },
          { title: 'Records waiting', render: function (k) { return number(k.parkedRecords); }, numeric: true },
          { title: 'Parked', render: function (k) { return time(k.parkedAt); } },
          { title: 'Error', render: function (k) { return cell(errorText(k.error), 160); } },
        ], page.items, { empty: 'No key is parked.', testid: 'parked-keys' }),
        pager(page, 'parked', query),
        bulkLink('parked-keys:release', query, 'Release the keys of this filter (bulk action, dry run first) →'));
    });
  }

  function parkedKeyPage(own, topic, key) {
    return get('parked-keys/' + enc(topic) + '/' + enc(key)).then(function (k) {
      if (own !== generation) return;
      var progress = el('div', { 'data-testid': 'release-progress' });
      var released = function (e) {
        if (e.state === 'done') append(progress, [status('The key is released: its records were handled in order. ', 'ok'), link(route('story', { key: k.key, topic: k.topic }), 'See its story')]);
        else release.disabled = false;
      };
      var release = el('button', { type: 'button', class: 'primary', disabled: !!k.pendingRelease, 'data-testid': 'release', onclick: function () {
        confirmAction('Release key ' + cut(k.key, 80) + '?', [
          'The group\'s consumer replays the ' + number(k.parkedRecords) + ' parked record(s) of this key through the handler, in order, exactly once, then the key flows again. Records of the key that arrive meanwhile wait behind them.',
          'Fix the cause first (the error below): a record that fails again parks the key again, and the records after it stay parked.',
        ], 'Release the key').then(function (answer) {
          if (!answer) return;
          release.disabled = true;
          act('parked-keys/' + enc(k.topic) + '/' + enc('sha256:' + k.keyDigest) + '/release', { wait: false }).then(function (r) {
            follow(progress, r.data, released);
          }, function (err) {
            release.disabled = false;
            fill(progress, status('Refused: ' + err.message, 'error'));
          });
        });
      } }, 'Release key…');
      if (k.pendingRelease) follow(progress, k.pendingRelease, released);
      // Each record's bytes, shown under its row when asked for.
      var boxes = {};
      k.records.forEach(function (r) { boxes[r.seq] = el('div', { class: 'record-box' }); });
      fill(main, 
        el('p', null, link('#/parked', '← Parked keys')),
        el('h1', null, 'Parked key ', el('span', { class: 'mono', 'data-testid': 'key' }, cut(k.key, 200))),
        section('Why it is parked', fields([
          ['Key', cell(k.key, 300)],
          ['Topic', k.topic],
          ['Reason', badge(k.reason)],
          ['Error', errorText(k.error)],
          ['Parked by', k.topic + '[' + k.partition + ']@' + k.offset],
          ['Its message id', cell(k.messageId, 300)],
          ['Parked', time(k.parkedAt)],
          ['Records waiting', number(k.parkedRecords)],
          ['Story', link(route('story', { key: k.key, topic: k.topic }), 'what the library set aside of this key')],
        ]), el('div', { class: 'buttons' }, release), progress),
        section('Parked records, in the order a release replays them', table([
          { title: 'Seq', key: 'seq', numeric: true },
          { title: 'Offset', render: function (r) { return '[' + r.partition + ']@' + r.offset; } },
          { title: 'Message id', render: function (r) { return link(route('story', { messageId: r.messageId }), cut(r.messageId, 80)); } },
          { title: 'Reason', render: function (r) { return badge(r.reason); } },
          { title: 'Error', render: function (r) { return cell(errorText(r.lastReleaseError || r.error), 160); } },
          { title: 'Release failures', key: 'releaseFailures', numeric: true },
          { title: '', render: function (r) { return recordButtons(r, k, boxes[r.seq]); } },
        ], k.records, { empty: 'No record waits.', testid: 'parked-records', after: function (r) { return boxes[r.seq]; } }),
        k.next ? el('p', { class: 'muted', 'data-testid': 'parked-records-more' }, 'The first ' + number(k.records.length) + ' of ' + number(k.parkedRecords) + ' records are shown (kafka-eo parked show pages through them all); a release replays them all, in this order.') : null));
    });
  }

  function recordButtons(r, k, box) {
    var show = el('button', { type: 'button', class: 'small', onclick: function () {
      if (box.childNodes.length) return fill(box);
      fill(box, status('Loading…'));
      get('parked-records/' + enc(r.seq)).then(function (d) {
        fill(box, el('h3', null, 'Key'), bytesView(d.recordKey), el('h3', null, 'Value'), valueView(d.value), el('h3', null, 'Headers'), headersTable(d.headers), d.error && d.error.stack ? el('details', null, el('summary', null, 'Stack'), pre(d.error.stack)) : null);
      }, function (err) { fill(box, status(err.message, 'error')); });
    } }, 'Record');
    var discard = el('button', { type: 'button', class: 'small danger', onclick: function () {
      confirmAction('Discard parked record ' + r.seq + '?', [
        'Message ' + cut(r.messageId, 120) + ' at ' + k.topic + '[' + r.partition + ']@' + r.offset + ' is dropped for good: its handler never runs for it. The key stays parked: release it to let its other records go.',
      ], 'Discard the record', { reason: 'Why it is discarded', reasonRequired: true, danger: true }).then(function (answer) {
        if (!answer) return;
        act('parked-records/' + enc(r.seq) + '/discard', { reason: answer.reason }).then(function () { render(); }, function (err) { fill(box, status('Refused: ' + err.message, 'error')); });
      });
    } }, 'Discard…');
    return el('div', { class: 'buttons' }, show, discard);
  }

  // ---- Dead letters ----

  function deadLettersPage(own, query) {
    return get('dead-letters', { topic: query.topic, reason: query.reason, key: query.key, after: query.after, from: query.from, to: query.to }).then(function (page) {
      if (own !== generation) return;
      fill(main, 
        el('h1', null, 'Dead letters'),
        query.from || query.to ? el('p', { class: 'muted', 'data-testid': 'time-range' }, 'Dead-lettered ' + (query.from ? 'from ' + query.from : '') + (query.to ? ' before ' + query.to : '') + ' (from a chart). ', link(route('dead-letters', { topic: query.topic, reason: query.reason, key: query.key }), 'Any time')) : null,
        filterForm(query, [{ name: 'topic', label: 'Topic' }, { name: 'key', label: 'Key' }, { name: 'reason', label: 'Reason', options: REASONS }], function (q) { location.hash = route('dead-letters', q); }),
        table([
          { title: 'Dead-lettered', render: function (d) { return time(d.deadLetteredAt); } },
          { title: 'Message id', render: function (d) { return link(route('dead-letters/' + enc(d.id), { topic: d.topic }), cut(d.messageId, 80)); } },
          { title: 'Record', render: function (d) { return d.topic + '[' + d.partition + ']@' + d.offset; } },
          { title: 'Key', render: function (d) { return cell(d.key, 80); } },
          { title: 'Reason', render: function (d) { return badge(d.reason); } },
          { title: 'Status', render: function (d) { return badge(d.status); } },
          { title: 'Error', render: function (d) { return cell(errorText(d.error), 140); } },
        ], page.items, { empty: 'No dead letter.', testid: 'dead-letters' }),
        pager(page, 'dead-letters', query),
        bulkLink('dead-letters:replay', query, 'Replay the dead letters of this filter (bulk action, dry run first) →'));
    });
  }

  function deadLetterPage(own, id, query) {
    return Promise.all([get('dead-letters/' + enc(id), { topic: query.topic }), get('dead-letters/' + enc(id) + '/record', { topic: query.topic })]).then(function (both) {
      if (own !== generation) return;
      var d = both[0];
      var record = both[1];
      var progress = el('div', { 'data-testid': 'replay-progress' });
      var replayable = d.status === 'dead-lettered' || d.status === 'deferred';
      var replay = replayable ? el('button', { type: 'button', class: 'primary', 'data-testid': 'replay', onclick: function () {
        confirmAction('Replay this dead letter?', [
          'The group\'s consumer runs the handler of ' + d.topic + ' once more for message ' + cut(d.messageId, 120) + ', with its original bytes, exactly once: its writes and events commit with the replay.',
          'A dead letter is replayed once; fix the cause first (' + (errorText(d.error) || d.reason) + ').',
        ], 'Replay it').then(function (answer) {
          if (!answer) return;
          replay.disabled = true;
          act('dead-letters/' + enc(d.id) + '/replay', { topic: d.topic, wait: false }).then(function (r) {
            follow(progress, r.data, function (e) {
              if (e.state === 'done') append(progress, [status('Replayed: the handler ran for it once more and its effects committed. ', 'ok'), link(route('story', { messageId: d.messageId }), 'See its story')]);
              else replay.disabled = false;
            });
          }, function (err) {
            replay.disabled = false;
            fill(progress, status('Refused: ' + err.message, 'error'));
          });
        });
      } }, 'Replay…') : null;
      fill(main, 
        el('p', null, link('#/dead-letters', '← Dead letters')),
        el('h1', null, 'Dead letter ', el('span', { class: 'mono' }, cut(d.messageId, 120))),
        section('What happened', fields([
          ['Message id', cell(d.messageId, 300)],
          ['Record', d.topic + '[' + d.partition + ']@' + d.offset],
          ['Dead-letter topic', record.deadLetterTopic],
          ['Reason', badge(d.reason)],
          ['Status', badge(d.status)],
          ['Attempts', number(d.attempts)],
          ['Dead-lettered', time(d.deadLetteredAt)],
          d.replayedAt ? ['Replayed', time(d.replayedAt)] : null,
          ['Error', errorText(d.error)],
          ['Story', link(route('story', { messageId: d.messageId }), 'everything known of this message')],
        ]), d.error && d.error.stack ? el('details', null, el('summary', null, 'Stack'), pre(d.error.stack)) : null, el('div', { class: 'buttons' }, replay), progress,
        d.status === 'parked' ? status('This record is parked under its key: release the key (Parked keys) to replay it with the key\'s other records, in order.', 'info') : null),
        section('Value', valueView(record.value)),
        section('Key', bytesView(record.key)),
        record.attemptHistory.length ? section('Attempts, stage by stage', table([
          { title: 'Stage', key: 'stage', numeric: true },
          { title: 'Topic', key: 'topic' },
          { title: 'Offset', render: function (a) { return '[' + a.partition + ']@' + a.offset; } },
          { title: 'Attempts', key: 'attempts', numeric: true },
          { title: 'Error', render: function (a) { return cell((a.error ? a.error + ': ' : '') + (a.message || ''), 200); } },
          { title: 'At', render: function (a) { return time(a.at); } },
        ], record.attemptHistory)) : null,
        section('Headers', headersTable(record.headers)),
        section('Operators\' actions', auditTable(d.history)));
    });
  }

  // ---- Retry tiers ----

  function retriesPage(own, query) {
    return Promise.all([get('overview'), get('retries', { topic: query.topic })]).then(function (both) {
      if (own !== generation) return;
      fill(main, 
        el('h1', null, 'Retry tiers'),
        el('p', { class: 'muted' }, 'Records of handlers with retry topics wait on their tier until they are due, then run again; after the last tier they are dead-lettered with the history of every attempt.'),
        section('Tiers of this instance', tiersTable(both[0].retryTiers.map(function (t) {
          var listed = both[1].items.filter(function (r) { return r.retryTopic === t.topic; }).length;
          return Object.assign({}, t, { waiting: Math.max(t.waiting, listed) });
        }))),
        filterForm(query, [{ name: 'topic', label: 'Topic' }], function (q) { location.hash = route('retries', q); }),
        section('Records waiting, the longest waiting first', table([
          { title: 'Tier', render: function (r) { return el('span', { class: 'mono' }, r.retryTopic); } },
          { title: 'Due', render: function (r) { return time(r.dueAt); } },
          { title: 'Message id', render: function (r) { return link(route('story', { messageId: r.messageId }), cut(r.messageId, 80)); } },
          { title: 'Failed on', render: function (r) { return r.failedOn + '[' + r.partition + ']@' + r.offset; } },
          { title: 'Error', render: function (r) { return cell(r.error, 160); } },
          { title: 'Moved', render: function (r) { return time(r.movedAt); } },
        ], both[1].items, { empty: 'No record waits on a retry tier.', testid: 'retrying' })));
    });
  }

  // ---- Outbox ----

  function outboxPage(own, query) {
    var state = query.state || 'set-aside';
    return Promise.all([get('outbox').catch(function (err) { if (err.status === 404) return null; throw err; }), null]).then(function (first) {
      if (own !== generation) return;
      var summary = first[0];
      if (!summary) {
        fill(main, el('h1', null, 'Outbox'), el('p', { class: 'muted' }, 'This database has no outbox.'));
        return;
      }
      return get('outbox/events', { state: state }).then(function (events) {
        if (own !== generation) return;
        fill(main, 
          el('h1', null, 'Outbox'),
          section('The relay', outboxFields(summary)),
          filterForm({ state: state }, [{ name: 'state', label: 'State', options: ['set-aside', 'retried', 'discarded', 'all'] }], function (q) { location.hash = route('outbox', q); }),
          section('Events Kafka refused for good', table([
            { title: 'Position', key: 'position', numeric: true },
            { title: 'Message id', render: function (e) { return link(route('story', { messageId: e.messageId }), cut(e.messageId, 80)); } },
            { title: 'Topic', key: 'topic' },
            { title: 'Key', render: function (e) { return cell(e.key, 80); } },
            { title: 'Size', render: function (e) { return bytes(e.valueBytes); }, numeric: true },
            { title: 'State', render: function (e) { return badge(e.state); } },
            { title: 'Set aside', render: function (e) { return time(e.setAsideAt); } },
            { title: 'Reason', render: function (e) { return cell(e.reason, 160); } },
            { title: '', render: function (e) { return e.state === 'set-aside' ? outboxButtons(e) : cell(e.resolvedBy ? 'by ' + e.resolvedBy + (e.note ? ': ' + e.note : '') : e.note); } },
          ], events, { empty: 'No event here.', testid: 'outbox-events' }), state === 'set-aside' && events.length ? bulkLink('outbox-set-aside:retry', {}, 'Retry or discard many of them (bulk action, dry run first) →') : null));
      });
    });
  }

  function outboxButtons(e) {
    var box = el('div');
    var retry = el('button', { type: 'button', class: 'small', onclick: function () {
      confirmAction('Retry outbox event ' + e.position + '?', [
        'The event goes back in the outbox at a new position, behind the events of key ' + cut(e.key, 80) + ' written since, and the relay sends it to ' + e.topic + ' with its message id. Make sure the topic takes it now (' + cut(e.reason, 200) + ').',
      ], 'Retry it', { reason: 'A note for the audit (optional)' }).then(function (answer) {
        if (!answer) return;
        act('outbox/events/' + enc(e.position) + '/retry', { reason: answer.reason }).then(function () { render(); }, function (err) { fill(box, status('Refused: ' + err.message, 'error')); });
      });
    } }, 'Retry…');
    var discard = el('button', { type: 'button', class: 'small danger', onclick: function () {
      confirmAction('Discard outbox event ' + e.position + '?', [
        'The event never reaches Kafka: its readers never see it. Its row stays here with your reason.',
      ], 'Discard it', { reason: 'Why it is discarded', reasonRequired: true, danger: true }).then(function (answer) {
        if (!answer) return;
        act('outbox/events/' + enc(e.position) + '/discard', { reason: answer.reason }).then(function () { render(); }, function (err) { fill(box, status('Refused: ' + err.message, 'error')); });
      });
    } }, 'Discard…');
    return el('div', null, el('div', { class: 'buttons' }, retry, discard), box);
  }

  // ---- Open transactions ----

  /** Whose a transaction is, in words: the group's unit of a partition, the outbox relay, replays, a publisher, or another application. */
  function ownerText(o) {
    if (o.kind === 'unit') return 'this group: the unit of ' + o.topic + '[' + o.partition + ']';
    if (o.kind === 'relay') return 'this library: the outbox relay ' + o.name;
    if (o.kind === 'replay') return 'this group: operator replays';
    if (o.kind === 'publisher') return 'this library: publisher ' + o.instanceId;
    if (o.kind === 'library') return 'this library (another group or an earlier configuration): ' + o.transactionalId;
    return 'another application';
  }

  function transactionsPage(own) {
    return get('transactions').then(function (doc) {
      if (own !== generation) return;
      var open = [];
      doc.partitions.forEach(function (p) { p.open.forEach(function (t) { open.push({ p: p, t: t }); }); });
      var unreadable = Object.keys(doc.unreadable || {});
      fill(main,
        el('div', { class: 'page-head' }, el('h1', null, 'Open transactions'), el('span', { class: 'muted refreshed' }, 'read ' + new Date(doc.generatedAt).toLocaleTimeString('en-GB'))),
        el('p', { class: 'muted' }, 'Per input and output partition of the group, as Kafka answers now: the last stable offset (where read_committed readers stop) against the high watermark, and where they differ, the transactions that hold it. Only a hanging transaction of another application (its coordinator no longer ends it) can be aborted here.'),
        unreadable.length ? status('Not read from Kafka: ' + unreadable.map(function (k) { return k + ' (' + cut(doc.unreadable[k], 300) + ')'; }).join('; '), 'warn') : null,
        section('Transactions holding a partition', table([
          { title: 'Partition', render: function (o) { return el('span', { class: 'mono' }, o.p.topic + '[' + o.p.partition + ']'); } },
          { title: 'Producer', render: function (o) { return el('span', { class: 'mono' }, o.t.producerId + ' (epoch ' + o.t.producerEpoch + ')'); } },
          { title: 'Transactional id', render: function (o) { return cell(o.t.transactionalId, 120); } },
          { title: 'Whose', render: function (o) { return ownerText(o.t.owner); } },
          { title: 'Coordinator', render: function (o) { return badge(o.t.coordinatorState || 'not named'); } },
          { title: 'Since', render: function (o) { return time(o.t.since); } },
          { title: 'From offset', render: function (o) { return o.t.startOffset; }, numeric: true },
          { title: 'Kafka aborts it', render: function (o) { return o.t.timeoutAt ? time(o.t.timeoutAt) : el('span', { class: 'muted' }, '–'); } },
          { title: '', render: function (o) { return o.t.abortable ? abortButton(o.p, o.t) : el('span', { class: 'muted' }, 'not here'); } },
        ], open, {
          empty: 'No transaction is open on the group\'s partitions.',
          testid: 'open-transactions',
          after: function (o) {
            if (!o.t.doing && !o.t.refusal) return null;
            return el('div', { class: 'why' }, o.t.doing ? el('div', null, el('strong', null, 'The library: '), o.t.doing) : null, o.t.refusal && o.t.owner.kind === 'other' ? el('div', null, el('strong', null, 'Not aborted here: '), o.t.refusal) : null);
          },
        })),
        section('Partitions', table([
          { title: 'Partition', render: function (p) { return el('span', { class: 'mono' }, p.topic + '[' + p.partition + ']'); } },
          { title: 'Role', key: 'role' },
          { title: 'Last stable offset', render: function (p) { return number(p.lastStableOffset); }, numeric: true },
          { title: 'High watermark', render: function (p) { return number(p.highWatermark); }, numeric: true },
          { title: 'Held back', render: function (p) { return p.lastStableOffset === null || p.highWatermark === null ? '–' : number(Number(p.highWatermark) - Number(p.lastStableOffset)); }, numeric: true },
          { title: 'Open', render: function (p) { return number(p.open.length); }, numeric: true },
        ], doc.partitions, { empty: 'The group has no partition (yet).', testid: 'transaction-partitions', rowClass: function (p) { return p.open.length ? 'row-bad' : null; } })));
    });
  }

  function abortButton(p, t) {
    var box = el('div');
    var button = el('button', { type: 'button', class: 'small danger', onclick: function () {
      confirmAction('Abort the transaction of producer ' + t.producerId + '?', [
        'Its coordinator no longer ends it (' + (t.coordinatorState || 'not named') + '): it holds ' + p.topic + '[' + p.partition + '] from offset ' + t.startOffset + ' for good. An abort marker is written on this partition (what kafka-transactions.sh abort does), if the transaction still starts at that offset and is older than the brokers\' transaction.max.timeout.ms.',
        'Its records in that transaction are then never read by read_committed readers. If ' + cut(t.transactionalId || 'its application', 120) + ' still needs them, it must send them again; on its other partitions it stays open (abort it there too, each on its own).',
      ], 'Abort it', { reason: 'Why it is aborted', reasonRequired: true, danger: true }).then(function (answer) {
        if (!answer) return;
        act('transactions/abort', { topic: p.topic, partition: p.partition, producerId: t.producerId, startOffset: t.startOffset, reason: answer.reason }).then(function (r) {
          fill(box, operationBox(r.data));
        }, function (err) { fill(box, status('Refused: ' + err.message, 'error')); });
      });
    } }, 'Abort…');
    return el('div', null, button, box);
  }

  // ---- A message's story ----

  /** What a key's story holds: the inbox keeps no record's key, so only what the library set aside of it. */
  var KEY_SCOPE = 'For a key, the library shows what it set aside of that key: its parked keys, the records parked under it (released or not), the records dead-lettered or waiting on a retry tier with it as their key, and the outbox events of it. The inbox does not keep a record\'s key: a record of this key that was handled without being parked, dead-lettered or sent to a retry tier is not listed (find it by its message id or its coordinates).';

  function storyPage(own, query) {
    var mode = query.find !== undefined ? 'find' : query.key !== undefined ? 'key' : query.offset !== undefined ? 'coordinates' : query.messageId !== undefined ? 'messageId' : 'find';
    var form = storyForm(query, mode);
    if (!query.find && !query.messageId && !query.key && !query.offset) {
      fill(main, el('h1', null, 'Message story'), el('p', { class: 'muted' }, 'Everything the library recorded of a message: where it was consumed, the unit that handled it, its outputs, its tiers, parking, dead letter, replays and the operators\' actions.'), form);
      return Promise.resolve();
    }
    if (mode === 'find') {
      // The top search box: the text as a message id and as a key, both asked for, both shown.
      var text = query.find;
      return Promise.all([get('story', { messageId: text.trim(), topic: query.topic }), get('story', { key: text, topic: query.topic })]).then(function (both) {
        if (own !== generation) return;
        var byId = both[0];
        var byKey = both[1];
        var keyFound = byKey.records.length || byKey.outbox.length || byKey.parkedKeys.length;
        fill(main,
          el('h1', null, 'Message story'),
          form,
          el('h2', { 'data-testid': 'found-as-message-id' }, 'As a message id: ', byId.records.length || byId.outbox.length ? number(byId.records.length) + ' record(s), ' + number(byId.outbox.length) + ' outbox event(s)' : 'nothing'),
          storyParts(byId, false, true),
          el('h2', { 'data-testid': 'found-as-key' }, 'As a key: ', keyFound ? number(byKey.parkedKeys.length) + ' parked key(s), ' + number(byKey.records.length) + ' record(s), ' + number(byKey.outbox.length) + ' outbox event(s)' : 'nothing'),
          el('p', { class: 'muted', 'data-testid': 'key-scope' }, KEY_SCOPE),
          storyParts(byKey, true, true, { key: text, topic: query.topic }));
      });
    }
    return get('story', { messageId: query.messageId, key: query.key, topic: query.topic, partition: query.partition, offset: query.offset, after: query.after }).then(function (s) {
      if (own !== generation) return;
      fill(main,
        el('h1', null, 'Message story'),
        form,
        mode === 'key' ? el('p', { class: 'muted', 'data-testid': 'key-scope' }, KEY_SCOPE) : null,
        storyParts(s, mode === 'key', false, mode === 'key' ? { key: query.key, topic: query.topic } : null));
    });
  }

  /** A story's parked keys, records and outbox events (quiet when empty, as one of two answers of a search). */
  /** `more`: the query whose `after` shows a key's next records (null: a story without a next page). */
  function storyParts(s, isKey, quiet, more) {
    var empty = s.records.length === 0 && s.outbox.length === 0 && s.parkedKeys.length === 0;
    return [
      s.parkedKeys.length ? section('Parked keys of this name', s.parkedKeys.map(function (k) { return el('p', null, link(keyRoute(k.topic, k.keyDigest), k.topic + ' ' + cut(k.key, 120)), ' – ', number(k.parkedRecords), ' records wait, ', cell(errorText(k.error), 300)); })) : null,
      empty && !quiet ? el('p', { class: 'empty', 'data-testid': 'story-empty' }, isKey ? 'The library set nothing aside of this key in this group.' : 'The library has no record of it in this group (a record handled more than inbox.retentionDays ago is forgotten).') : null,
      s.records.map(recordStory),
      s.truncated ? el('p', { class: 'muted', 'data-testid': 'story-truncated' }, 'There is more: ' + number(s.records.length) + ' records are shown, oldest first. ', s.next && more ? link(route('story', { key: more.key, topic: more.topic, after: s.next }), 'Next records →') : null) : null,
      s.outbox.length ? section('In the outbox', table([
        { title: 'Position', key: 'position', numeric: true },
        { title: 'Message id', render: function (e) { return cell(e.messageId, 80); } },
        { title: 'Topic', key: 'topic' },
        { title: 'State', render: function (e) { return badge(e.state); } },
        { title: 'Written', render: function (e) { return time(e.writtenAt); } },
        { title: 'Reason', render: function (e) { return cell(e.reason, 160); } },
      ], s.outbox)) : null,
    ];
  }

  function storyForm(query, mode) {
    var select = el('select', { name: 'mode', 'aria-label': 'Search by' },
      el('option', { value: 'find', selected: mode === 'find' }, 'Message id or key'),
      el('option', { value: 'messageId', selected: mode === 'messageId' }, 'Message id'),
      el('option', { value: 'key', selected: mode === 'key' }, 'Key'),
      el('option', { value: 'coordinates', selected: mode === 'coordinates' }, 'Topic, partition, offset'));
    var text = el('input', { type: 'text', name: 'text', value: query.find || query.messageId || query.key || '', placeholder: 'message id or key', 'aria-label': 'Message id or key', autocomplete: 'off', spellcheck: 'false' });
    var topic = el('input', { type: 'text', name: 'topic', value: query.topic || '', placeholder: 'topic (optional)', 'aria-label': 'Topic', autocomplete: 'off' });
    var partition = el('input', { type: 'text', name: 'partition', value: query.partition || '', placeholder: 'partition', 'aria-label': 'Partition', autocomplete: 'off' });
    var offset = el('input', { type: 'text', name: 'offset', value: query.offset || '', placeholder: 'offset', 'aria-label': 'Offset', autocomplete: 'off' });
    return el('form', { class: 'filters', 'data-testid': 'story-form', onsubmit: function (e) {
      e.preventDefault();
      var m = select.value;
      if (m === 'coordinates') location.hash = route('story', { topic: topic.value.trim(), partition: partition.value.trim(), offset: offset.value.trim() });
      else if (m === 'find') location.hash = route('story', { find: text.value, topic: topic.value.trim() });
      else location.hash = route('story', m === 'key' ? { key: text.value, topic: topic.value.trim() } : { messageId: text.value.trim(), topic: topic.value.trim() });
    } }, el('label', null, 'Search by', select), el('label', null, 'Id or key', text), el('label', null, 'Topic', topic), el('label', null, 'Partition', partition), el('label', null, 'Offset', offset), el('button', { type: 'submit' }, 'Search'));
  }

  function recordStory(r) {
    return el('section', { class: 'card story', 'data-testid': 'record-story' },
      el('h2', null, 'Message ', el('span', { class: 'mono' }, cut(r.messageId, 160)), ' ', badge(r.status)),
      fields([
        ['Message id', cell(r.messageId, 300)],
        ['Consumed at', r.input.topic + '[' + r.input.partition + ']@' + r.input.offset + (r.identity === 'coordinates' ? ' (no message id: known by its coordinates)' : r.identity === 'event-key' ? ' (no message id: known by its event\'s key, messageIdFrom)' : '')],
        ['Claimed', time(r.claimedAt)],
        ['Handled', time(r.processedAt)],
        ['Attempts', number(r.attempts) + (r.failures ? ', ' + r.failures + ' failed alone' : '')],
        r.lastError ? ['Last error', errorText(r.lastError)] : null,
        ['Unit of work', r.unit ? 'unit ' + r.unit.id + ' of ' + r.unit.topic + '[' + r.unit.partition + '], up to offset ' + r.unit.lastOffset + ', committed ' + ago(r.unit.committedAt) : r.outputs.length ? 'its outputs are recorded on its own row' : '–'],
        r.retry ? ['On retry tier', el('span', null, r.retry.topic + ' (tier ' + r.retry.tier + '), due ' + ago(r.retry.dueAt) + (r.retry.error ? ': ' : ''), r.retry.error ? cell(r.retry.error, 600) : null)] : null,
        r.deadLetter ? ['Dead letter', el('span', null, badge(r.deadLetter.reason), ' on ' + r.deadLetter.topic + ' ', cell(errorText(r.deadLetter.error), 600), r.deadLetter.replayedAt ? ', replayed ' + ago(r.deadLetter.replayedAt) : '', ' ', link(route('dead-letters/' + enc(r.id), { topic: r.input.topic }), 'open'))] : null,
      ]),
      el('h3', null, 'Outputs'),
      table([
        { title: 'Topic', key: 'topic' },
        { title: 'Key', render: function (o) { return bytesView(o.key); } },
        { title: 'Message id', render: function (o) { return cell(o.messageId, 80); } },
        { title: 'Event type', key: 'eventType' },
        { title: 'Size', render: function (o) { return bytes(o.bytes); }, numeric: true },
      ], r.outputs, { empty: 'No output recorded.' }),
      r.history.length ? [el('h3', null, 'Attempts, stage by stage'), table([
        { title: 'Stage', key: 'stage', numeric: true },
        { title: 'Topic', key: 'topic' },
        { title: 'Attempts', key: 'attempts', numeric: true },
        { title: 'Error', render: function (a) { return cell((a.error ? a.error + ': ' : '') + (a.message || ''), 200); } },
        { title: 'At', render: function (a) { return time(a.at); } },
      ], r.history)] : null,
      r.parked.length ? [el('h3', null, 'Parking'), table([
        { title: 'Seq', key: 'seq', numeric: true },
        { title: 'Key', render: function (p) { return p.key ? link(keyRoute(p.topic, p.keyDigest), cut(p.key, 80)) : cell(null); } },
        { title: 'State', render: function (p) { return badge(p.state); } },
        { title: 'Reason', render: function (p) { return badge(p.reason); } },
        { title: 'Parked', render: function (p) { return time(p.parkedAt); } },
        { title: 'Resolved', render: function (p) { return time(p.resolvedAt); } },
      ], r.parked)] : null,
      r.replays.length ? [el('h3', null, 'Replays'), table([
        { title: 'Replay', key: 'seq', numeric: true },
        { title: 'Operation', key: 'operation', numeric: true },
        { title: 'Outputs', key: 'outputs', numeric: true },
        { title: 'Committed in Kafka', render: function (p) { return p.settled ? 'yes' : 'not yet'; } },
        { title: 'At', render: function (p) { return time(p.createdAt); } },
      ], r.replays)] : null,
      el('h3', null, 'Operators\' actions'),
      auditTable(r.actions));
  }

  // ---- Audit ----

  function auditTable(entries) {
    return table([
      { title: 'Id', key: 'id', numeric: true },
      { title: 'Requested', render: function (a) { return time(a.requestedAt); } },
      { title: 'Action', render: function (a) { return badge(a.action); } },
      { title: 'Topic', key: 'topic' },
      { title: 'Key / message', render: function (a) { return cell(a.key || a.messageId, 80); } },
      { title: 'Actor', key: 'actor' },
      // The name the caller gave of itself, beside the authenticated actor: a label, not an identity.
      { title: 'Declared name', render: function (a) { return cell(a.declaredActor, 80); } },
      { title: 'Reason', render: function (a) { return cell(a.reason, 160); } },
      { title: 'State', render: function (a) { return badge(a.state); } },
      { title: 'Result', render: function (a) { return cell(a.result ? JSON.stringify(a.result) : null, 160); } },
    ], entries || [], { empty: 'No operator action.', testid: 'audit' });
  }

  function auditPage(own, query) {
    return get('audit', { action: query.action, topic: query.topic, key: query.key, actor: query.actor, after: query.after }).then(function (page) {
      if (own !== generation) return;
      fill(main, 
        el('h1', null, 'Audit'),
        el('p', { class: 'muted' }, 'Every operator action, from this page, the admin API and kafka-eo alike: who, when, why, and how it ended.'),
        filterForm(query, [{ name: 'action', label: 'Action', options: ACTIONS }, { name: 'topic', label: 'Topic' }, { name: 'key', label: 'Key' }, { name: 'actor', label: 'Actor' }], function (q) { location.hash = route('audit', q); }),
        auditTable(page.items),
        pager(page, 'audit', query));
    });
  }

  // ---- Bulk actions ----

  var BULK_WHAT = [
    ['dead-letters:replay', 'Replay dead letters'],
    ['parked-keys:release', 'Release parked keys'],
    ['outbox-set-aside:retry', 'Retry outbox events set aside'],
    ['outbox-set-aside:discard', 'Discard outbox events set aside'],
  ];
  var BULK_FILTER = ['topic', 'reason', 'error', 'from', 'to', 'key'];

  /** A link to the bulk page with the same filter as a list page shows, its dry run run at once. */
  function bulkLink(what, query, text) {
    var q = { what: what, dry: '1' };
    BULK_FILTER.forEach(function (f) { if (query[f]) q[f] = query[f]; });
    return el('p', { class: 'bulk-link' }, link(route('bulk', q), text));
  }

  function bulkWhat(o) {
    var known = BULK_WHAT.filter(function (w) { return w[0] === o.kind + ':' + o.action; })[0];
    return known ? known[1] : o.action + ' ' + o.kind;
  }

  function bulkFilterText(filter) {
    var parts = BULK_FILTER.filter(function (f) { return filter && filter[f] !== undefined; }).map(function (f) { return f + ' ' + JSON.stringify(filter[f]); });
    return parts.length ? parts.join(', ') : 'no filter: every item';
  }

  /** The filter form, the dry run (what it matches now, the first ten), the start, and the latest bulk actions. */
  function bulkPage(own, query) {
    var what = BULK_WHAT.some(function (w) { return w[0] === query.what; }) ? query.what : BULK_WHAT[0][0];
    var kind = what.split(':')[0];
    var action = what.split(':')[1];
    var filter = {};
    BULK_FILTER.forEach(function (f) { if (query[f]) filter[f] = query[f]; });
    if (kind === 'outbox-set-aside') delete filter.reason;
    var rate = /^[0-9]{1,3}$/.test(query.rate || '') ? Number(query.rate) : 10;
    var dry = query.dry === '1' ? get('bulk/dry-run', Object.assign({ kind: kind, action: action }, filter)) : Promise.resolve(null);
    return Promise.all([dry, get('bulk', { limit: 20 })]).then(function (both) {
      if (own !== generation) return;
      var result = both[0];
      var form = el('form', { class: 'filters bulk-form', 'data-testid': 'bulk-form', onsubmit: function (e) {
        e.preventDefault();
        var next = { what: form.elements.what.value, dry: '1', rate: form.elements.rate.value.trim() };
        BULK_FILTER.forEach(function (f) { if (form.elements[f]) next[f] = f === 'reason' ? form.elements[f].value : form.elements[f].value.trim(); });
        location.hash = route('bulk', next);
      } },
      el('label', null, 'Action', el('select', { name: 'what', 'aria-label': 'Action' }, BULK_WHAT.map(function (w) { return el('option', { value: w[0], selected: w[0] === what }, w[1]); }))),
      el('label', null, 'Topic', el('input', { type: 'text', name: 'topic', value: filter.topic || '', placeholder: 'Topic', 'aria-label': 'Topic', autocomplete: 'off', spellcheck: 'false' })),
      kind === 'outbox-set-aside' ? null : el('label', null, 'Reason', el('select', { name: 'reason', 'aria-label': 'Reason' }, el('option', { value: '' }, 'any reason'), REASONS.map(function (r) { return el('option', { value: r, selected: filter.reason === r }, r); }))),
      el('label', null, 'Error contains', el('input', { type: 'text', name: 'error', value: filter.error || '', placeholder: kind === 'outbox-set-aside' ? 'text of the reason' : 'text of the error', 'aria-label': 'Error contains', maxlength: '200', autocomplete: 'off', spellcheck: 'false' })),
      el('label', null, 'From', el('input', { type: 'text', name: 'from', value: filter.from || '', placeholder: '2026-12-06T10:00:00Z', 'aria-label': 'From', autocomplete: 'off', spellcheck: 'false' })),
      el('label', null, 'To', el('input', { type: 'text', name: 'to', value: filter.to || '', placeholder: '2026-12-06T12:00:00Z', 'aria-label': 'To', autocomplete: 'off', spellcheck: 'false' })),
      el('label', null, 'Key', el('input', { type: 'text', name: 'key', value: filter.key || '', placeholder: 'Key', 'aria-label': 'Key', autocomplete: 'off', spellcheck: 'false' })),
      el('label', null, 'Items per second', el('input', { type: 'text', name: 'rate', value: String(rate), 'aria-label': 'Items per second', maxlength: '3', autocomplete: 'off' })),
      el('button', { type: 'submit', 'data-testid': 'bulk-dry-run' }, 'Dry run'));
      fill(main,
        el('h1', null, 'Bulk actions'),
        el('p', { class: 'muted' }, 'Replay the dead letters, release the parked keys, retry or discard the outbox events set aside that a filter matches: a dry run first, then each item at the rate you give, each recorded in the audit, each acted on once however often the bulk action is started.'),
        form,
        result ? bulkDryRunView(result, rate) : null,
        section('Latest bulk actions', bulkTable(both[1].items)));
    });
  }

  function bulkDryRunView(result, rate) {
    var progress = el('div', { 'data-testid': 'bulk-start-progress' });
    var n = number(result.matched) + (result.atLeast ? '+' : '');
    var start = result.matched > 0 ? el('button', { type: 'button', class: 'primary', 'data-testid': 'bulk-start', onclick: function () {
      confirmAction(bulkWhat(result) + ': ' + n + ' items?', [
        'Filter: ' + bulkFilterText(result.filter) + '.',
        result.kind === 'outbox-set-aside'
          ? 'Each event is ' + (result.action === 'retry' ? 'put back in the outbox' : 'given up for good') + ', ' + rate + ' a second, with your reason on its row.'
          : 'Each is queued for the group\'s consumer, ' + rate + ' a second, and recorded in the audit with your reason; the consumer carries each out once.',
        'Items set aside after the start are not part of it. If the count changed since this dry run, the start is refused: run the dry run again.',
      ], 'Start', { reason: 'Why (kept in the audit of every item)', reasonRequired: true, danger: result.action === 'discard' }).then(function (answer) {
        if (!answer) return;
        start.disabled = true;
        act('bulk', { kind: result.kind, action: result.action, filter: result.filter, reason: answer.reason, ratePerSecond: rate, expect: result.matched }).then(function (r) {
          location.hash = route('bulk/' + enc(r.data.id));
        }, function (err) {
          start.disabled = false;
          fill(progress, status('Refused: ' + err.message, 'error'));
        });
      });
    } }, 'Start…') : null;
    var columns = result.kind === 'dead-letters' ? [
      { title: 'Dead-lettered', render: function (d) { return time(d.deadLetteredAt); } },
      { title: 'Message id', render: function (d) { return link(route('dead-letters/' + enc(d.id), { topic: d.topic }), cut(d.messageId, 80)); } },
      { title: 'Record', render: function (d) { return d.topic + '[' + d.partition + ']@' + d.offset; } },
      { title: 'Key', render: function (d) { return cell(d.key, 80); } },
      { title: 'Reason', render: function (d) { return badge(d.reason); } },
      { title: 'Error', render: function (d) { return cell(errorText(d.error), 140); } },
    ] : result.kind === 'parked-keys' ? [
      { title: 'Parked', render: function (k) { return time(k.parkedAt); } },
      { title: 'Key', render: function (k) { return link(keyRoute(k.topic, k.keyDigest), cut(k.key, 120)); } },
      { title: 'Topic', key: 'topic' },
      { title: 'Reason', render: function (k) { return badge(k.reason); } },
      { title: 'Error', render: function (k) { return cell(errorText(k.error), 140); } },
    ] : [
      { title: 'Position', key: 'position', numeric: true },
      { title: 'Message id', render: function (e) { return link(route('story', { messageId: e.messageId }), cut(e.messageId, 80)); } },
      { title: 'Topic', key: 'topic' },
      { title: 'Key', render: function (e) { return cell(e.key, 80); } },
      { title: 'Set aside', render: function (e) { return time(e.setAsideAt); } },
      { title: 'Reason', render: function (e) { return cell(e.reason, 140); } },
    ];
    return section('Dry run',
      el('p', { 'data-testid': 'bulk-matched' }, el('strong', null, n), ' ' + (result.matched === 1 ? 'item matches' : 'items match') + ' now (' + bulkFilterText(result.filter) + ')' + (result.sample.length ? '; the first ' + result.sample.length + ', in the order they are acted on:' : '.')),
      table(columns, result.sample, { empty: 'Nothing matches: there is nothing to act on.', testid: 'bulk-sample' }),
      el('div', { class: 'buttons' }, start), progress);
  }

  function bulkTable(items) {
    return table([
      { title: 'Bulk action', render: function (o) { return link(route('bulk/' + enc(o.id)), '#' + o.id); } },
      { title: 'What', render: function (o) { return bulkWhat(o); } },
      { title: 'Filter', render: function (o) { return cell(bulkFilterText(o.filter), 160); } },
      { title: 'State', render: function (o) { return badge(o.state); } },
      { title: 'Matched', render: function (o) { return number(o.matched) + (o.matchedAtLeast ? '+' : ''); }, numeric: true },
      { title: 'Acted on', render: function (o) { return number(o.acted); }, numeric: true },
      { title: 'Skipped', render: function (o) { return number(o.skipped); }, numeric: true },
      { title: 'Started', render: function (o) { return time(o.createdAt); } },
      { title: 'Actor', key: 'actor' },
    ], items || [], { empty: 'No bulk action yet.', testid: 'bulk-list' });
  }

  /** One bulk action's progress, refreshed every second while it runs. */
  function bulkOperationPage(own, id) {
    return get('bulk/' + enc(id)).then(function (o) {
      if (own !== generation) return;
      var walkedItems = o.acted + o.skipped;
      var bar = el('progress', { 'aria-label': 'Progress', 'data-testid': 'bulk-bar' });
      bar.max = Math.max(1, o.matched);
      bar.value = Math.min(walkedItems, bar.max);
      var out = o.outcomes;
      var cancel = o.state === 'running' ? el('button', { type: 'button', class: 'danger', 'data-testid': 'bulk-cancel', onclick: function () {
        confirmAction('Cancel bulk action #' + o.id + '?', ['No item is acted on after the one in hand. Replays or releases it queued already are still carried out by the consumer.'], 'Cancel it', { danger: true }).then(function (answer) {
          if (!answer) return;
          act('bulk/' + enc(o.id) + '/cancel', {}).then(function () { render(); }, function (err) { append(main, status('Refused: ' + err.message, 'error')); });
        });
      } }, 'Cancel…') : null;
      var skipped = Object.keys(o.skipReasons || {}).map(function (r) { return r + ': ' + number(o.skipReasons[r]); }).join(', ');
      fill(main,
        el('p', null, link('#/bulk', '← Bulk actions')),
        el('h1', null, 'Bulk action #' + o.id + ': ' + bulkWhat(o)),
        el('div', { class: 'status status-' + (o.state === 'done' ? (o.failed ? 'warn' : 'ok') : o.state === 'running' ? 'info' : 'warn'), 'data-testid': 'bulk-state', 'data-state': o.state },
          o.state === 'running' ? (o.walked ? 'Every item is walked; waiting for the consumer to carry out those queued.' : 'Running: ' + number(o.ratePerSecond) + ' items a second.') :
          o.state === 'done' ? 'Done: ' + number(o.acted) + ' acted on, ' + number(o.skipped) + ' skipped' + (o.failed ? ', ' + number(o.failed) + ' failed' : '') + '.' :
          o.state === 'cancelled' ? 'Cancelled' + (o.cancelledBy ? ' by ' + o.cancelledBy : '') + ': ' + number(o.acted) + ' acted on before.' : 'Failed: ' + (o.lastError || '')),
        el('div', { class: 'bulk-progress' }, bar, el('span', { 'data-testid': 'bulk-walked' }, ' ' + number(walkedItems) + ' of ' + number(o.matched) + (o.matchedAtLeast ? '+' : '') + ' walked')),
        section('Progress', fields([
          ['State', badge(o.state)],
          ['Filter', bulkFilterText(o.filter)],
          ['Reason', o.reason],
          ['Matched at the start', number(o.matched) + (o.matchedAtLeast ? '+' : '')],
          ['Acted on', el('span', { 'data-testid': 'bulk-acted' }, number(o.acted))],
          ['Skipped', number(o.skipped) + (skipped ? ' (' + skipped + ')' : '')],
          out ? ['Carried out by the consumer', el('span', { 'data-testid': 'bulk-outcomes' }, number(out.done) + ' done, ' + number(out.failed) + ' failed, ' + number(out.pending + out.running) + ' waiting')] : null,
          ['Rate', number(o.ratePerSecond) + ' items a second'],
          ['Started', time(o.createdAt)],
          o.finishedAt ? ['Finished', time(o.finishedAt)] : null,
          ['Actor', o.actor + (o.declaredActor ? ' (says: ' + o.declaredActor + ')' : '')],
          o.lease ? ['Walked by', o.lease.owner + ', lease until ' + new Date(o.lease.until).toLocaleTimeString('en-GB')] : null,
          o.lastError ? ['Last error', o.lastError] : null,
          ['Audit', o.kind === 'outbox-set-aside' ? 'on each event\'s row (the outbox page), with the note "bulk #' + o.id + ': …"' : link(route('audit', { action: o.action }), 'each ' + o.action + ' with the reason "bulk #' + o.id + ': …"')],
        ]), el('div', { class: 'buttons' }, cancel)));
      if (o.state === 'running') {
        clearTimeout(refreshTimer);
        refreshTimer = setTimeout(function () {
          if (own !== generation) return;
          bulkOperationPage(own, id).catch(function (err) { if (own === generation) failed(err); });
        }, 1000);
      }
    });
  }

  // ---- Routing ----

  function parseHash() {
    var hash = location.hash.replace(/^#\/?/, '');
    var q = hash.indexOf('?');
    var path = q >= 0 ? hash.slice(0, q) : hash;
    var query = {};
    if (q >= 0) {
      hash.slice(q + 1).split('&').forEach(function (pair) {
        if (!pair) return;
        var eq = pair.indexOf('=');
        try {
          query[decodeURIComponent(eq >= 0 ? pair.slice(0, eq) : pair)] = decodeURIComponent(eq >= 0 ? pair.slice(eq + 1) : '');
        } catch (e) {
          // A malformed part of the address is left out.
        }
      });
    }
    var parts = path.split('/').map(function (p) {
      try {
        return decodeURIComponent(p);
      } catch (e) {
        return p;
      }
    });
    return { parts: parts, query: query };
  }

  function render() {
    generation++;
    clearTimeout(refreshTimer);
    var own = generation;
    // No sign-in form either: a token typed into a page whose API is elsewhere has nowhere safe to go.
    if (!API_BASE) {
      layoutSignedOut();
      return failed(new ApiError(0, OFF_ORIGIN, null));
    }
    if (settings.auth === 'token' && !session.token()) return signInPage();
    var at = parseHash();
    var page = at.parts[0] || 'overview';
    var known = NAV.some(function (n) { return n[0] === page; });
    layout(known ? page : 'overview');
    main.appendChild(status('Loading…'));
    var work;
    if (page === 'parked' && at.parts.length >= 3) work = parkedKeyPage(own, at.parts[1], at.parts.slice(2).join('/'));
    else if (page === 'parked') work = parkedListPage(own, at.query);
    else if (page === 'dead-letters' && at.parts[1]) work = deadLetterPage(own, at.parts[1], at.query);
    else if (page === 'dead-letters') work = deadLettersPage(own, at.query);
    else if (page === 'retries') work = retriesPage(own, at.query);
    else if (page === 'charts') work = chartsPage(own, at.query);
    else if (page === 'outbox') work = outboxPage(own, at.query);
    else if (page === 'transactions') work = transactionsPage(own);
    else if (page === 'story') work = storyPage(own, at.query);
    else if (page === 'audit') work = auditPage(own, at.query);
    else if (page === 'bulk' && at.parts[1]) work = bulkOperationPage(own, at.parts[1]);
    else if (page === 'bulk') work = bulkPage(own, at.query);
    else work = overviewPage(own);
    work.catch(function (err) {
      if (own !== generation) return;
      if (err instanceof ApiError && err.status === 401) return signInPage(err.message);
      failed(err);
    });
  }

  window.addEventListener('hashchange', render);
  render();
})();
