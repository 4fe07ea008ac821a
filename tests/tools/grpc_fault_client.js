// Misbehaving gRPC clients of fabricscoped for the fault-injection tests
// (tests/e2e/fault_grpc_test.sh). Uses @grpc/grpc-js and @grpc/proto-loader
// from the npm install of tests/e2e/otel (never committed) and the daemon's
// own proto/ files.
//
//   node grpc_fault_client.js SRC_DIR stall ADDR STREAMS HOLD_S send|silent
//       Opens STREAMS Ingest.PushStream calls over 10 separate connections;
//       with `send` each writes one message of 1 valid span first. None is
//       ever half-closed. Holds them HOLD_S seconds (or until SIGTERM), then
//       exits. Prints one JSON line when all streams are opened and one at
//       the end: {"opened", "failed": {grpc status code: count}, ...}.
//   node grpc_fault_client.js SRC_DIR probe ADDR
//       One unary Push of 1 valid span with a 3 s deadline. Prints
//       {"ok": bool, "code": grpc status code, "accepted": n}; exits 0 either way.
//   node grpc_fault_client.js SRC_DIR flood ADDR RATE SECONDS BATCH INVALID_EVERY
//       Unary Push calls of BATCH spans at RATE spans/s for SECONDS seconds
//       (at most 16 calls in flight); every INVALID_EVERY-th span has an
//       empty name (missing_name). Prints {"sent", "accepted", "rejected",
//       "by_reason", "failed_calls": {code: spans}, "seconds", "rate"}.
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const [srcDir, mode, addr, ...rest] = process.argv.slice(2);
if (!srcDir || !mode || !addr) {
  console.error('usage: node grpc_fault_client.js SRC_DIR stall|probe|flood ADDR ...');
  process.exit(2);
}

const def = protoLoader.loadSync('fabricscope/v1/ingest.proto', {
  includeDirs: [path.join(srcDir, 'proto')],
  keepCase: true,
  longs: String,
  enums: String,
  defaults: false,
});
const Ingest = grpc.loadPackageDefinition(def).fabricscope.v1.Ingest;

// A distinct option value per client keeps grpc-js from sharing one
// subchannel (one TCP connection) between them.
function client(i) {
  return new Ingest(addr, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
    'fabricscope.fault_client': i,
    'grpc.max_send_message_length': 64 << 20,
  });
}

let seq = 0;
function span(valid) {
  seq++;
  const id = Buffer.alloc(16);
  id.writeUInt32BE(process.pid, 0);
  id.writeUInt32BE(seq, 12);
  const sid = Buffer.alloc(8);
  sid.writeUInt32BE(seq, 4);
  const now = BigInt(Date.now()) * 1000000n;
  return {
    trace_id: id,
    span_id: sid,
    name: valid ? 'decode' : '',
    start_unix_nano: (now - 3000000n).toString(),
    end_unix_nano: (now - 1000000n).toString(),
    rdma_device: 'mlx5_0',
    rdma_port: 1,
    attributes: [{ key: 'decode.step', value: String(seq) }],
  };
}

function countInto(map, key, n) {
  map[key] = (map[key] || 0) + n;
}

if (mode === 'probe') {
  const c = client(0);
  c.Push({ spans: [span(true)] }, { deadline: Date.now() + 3000 }, (err, resp) => {
    console.log(JSON.stringify(err ? { ok: false, code: err.code, details: err.details }
                                   : { ok: true, code: 0, accepted: Number(resp.accepted_spans || 0) }));
    process.exit(0);
  });
} else if (mode === 'stall') {
  const streams = parseInt(rest[0], 10);
  const holdS = parseFloat(rest[1]);
  const send = rest[2] === 'send';
  const clients = [];
  for (let i = 0; i < 10; i++) clients.push(client(i));
  const failed = {};
  let opened = 0;
  let finished = 0;
  const calls = [];
  for (let i = 0; i < streams; i++) {
    const call = clients[i % clients.length].PushStream((err) => {
      finished++;
      if (err) countInto(failed, err.code, 1);
    });
    call.on('error', () => {});  // reported through the callback
    if (send) call.write({ spans: [span(true)] });
    calls.push(call);
    opened++;
  }
  // Let the daemon answer what it refuses at once.
  setTimeout(() => {
    console.log(JSON.stringify({ phase: 'holding', opened, finished, failed }));
  }, 2000);
  const done = () => {
    console.log(JSON.stringify({ phase: 'done', opened, finished, failed }));
    process.exit(0);
  };
  process.on('SIGTERM', done);
  setTimeout(done, holdS * 1000);
} else if (mode === 'flood') {
  const rate = parseFloat(rest[0]);
  const seconds = parseFloat(rest[1]);
  const batch = parseInt(rest[2], 10);
  const invalidEvery = parseInt(rest[3], 10);
  const c = client(0);
  const out = { sent: 0, accepted: 0, rejected: 0, by_reason: {}, failed_calls: {} };
  let inFlight = 0;
  const start = Date.now();
  const end = start + seconds * 1000;
  let finishedSending = false;
  const maybeDone = () => {
    if (finishedSending && inFlight === 0) {
      out.seconds = (Date.now() - start) / 1000;
      out.rate = Math.round(out.sent / out.seconds);
      console.log(JSON.stringify(out));
      process.exit(0);
    }
  };
  const tick = () => {
    const now = Date.now();
    if (now >= end) {
      finishedSending = true;
      maybeDone();
      return;
    }
    const due = Math.floor(((now - start) / 1000) * rate);
    while (out.sent + batch <= due + batch && out.sent < due && inFlight < 16) {
      const spans = [];
      for (let i = 0; i < batch; i++) spans.push(span((out.sent + i + 1) % invalidEvery !== 0));
      out.sent += batch;
      inFlight++;
      c.Push({ spans }, { deadline: Date.now() + 10000 }, (err, resp) => {
        inFlight--;
        if (err) {
          countInto(out.failed_calls, err.code, spans.length);
        } else {
          out.accepted += Number(resp.accepted_spans || 0);
          out.rejected += Number(resp.rejected_spans || 0);
          for (const r of resp.rejections || []) countInto(out.by_reason, r.reason, 1);
        }
        if (finishedSending) maybeDone();
      });
    }
    setTimeout(tick, 5);
  };
  tick();
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
