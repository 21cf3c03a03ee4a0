// The console page: one xterm.js terminal on one WebSocket. The server
// sends what the machine prints as binary messages; a read-write page
// sends the keys the same way. Nothing else travels on the socket.
(function () {
  'use strict';

  var body = document.body;
  var node = body.dataset.node;
  var readOnly = body.dataset.mode !== 'read-write';
  var stateEl = document.getElementById('state');

  function setState(text, cls) {
    stateEl.textContent = text;
    stateEl.className = 'state ' + cls;
  }

  var term = new Terminal({
    cursorBlink: !readOnly,
    disableStdin: readOnly,
    scrollback: 10000,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", monospace',
    fontSize: 14,
    theme: { background: '#101214', foreground: '#d8dadc' }
  });
  var fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(document.getElementById('terminal'));
  fit.fit();
  window.addEventListener('resize', function () { fit.fit(); });

  // The socket is beside the page: .../{node}?token=T -> .../{node}/ws?token=T.
  var url = new URL(encodeURIComponent(node) + '/ws' + location.search, location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  var ws = new WebSocket(url.href);
  ws.binaryType = 'arraybuffer';
  var encoder = new TextEncoder();

  ws.onopen = function () {
    setState(readOnly ? 'connected, read-only' : 'connected', 'open');
    if (!readOnly) { term.focus(); }
  };
  ws.onmessage = function (ev) {
    if (typeof ev.data === 'string') {
      term.write(ev.data);
    } else {
      term.write(new Uint8Array(ev.data));
    }
  };
  ws.onclose = function (ev) {
    var why = ev.reason;
    if (!why) {
      why = ev.code === 1006 ? 'the link expired or the connection was lost; open a new console link' : 'code ' + ev.code;
    }
    setState('closed: ' + why, 'closed');
    term.options.disableStdin = true;
    term.options.cursorBlink = false;
  };

  function send(bytes) {
    if (!readOnly && ws.readyState === WebSocket.OPEN) { ws.send(bytes); }
  }
  term.onData(function (data) { send(encoder.encode(data)); });
  // onBinary carries mouse reports and the like, one byte per character.
  term.onBinary(function (data) {
    var bytes = new Uint8Array(data.length);
    for (var i = 0; i < data.length; i++) { bytes[i] = data.charCodeAt(i) & 0xff; }
    send(bytes);
  });
}());
