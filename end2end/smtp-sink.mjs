// A real SMTP server on 127.0.0.1 for the browser tests: enough of RFC 5321
// for Dakghar's mailer to deliver, each mail appended as a JSON line to a
// file the tests read. Usage: node smtp-sink.mjs <port> <file>
import { createServer } from 'node:net';
import { appendFileSync } from 'node:fs';

const [port, file] = process.argv.slice(2);

createServer((socket) => {
  let buffer = '';
  let data = null;
  let to = [];
  const say = (line) => socket.write(`${line}\r\n`);
  say('220 dakghar-e2e smtp sink');
  socket.on('data', (chunk) => {
    buffer += chunk.toString('utf8');
    for (;;) {
      if (data !== null) {
        const end = buffer.indexOf('\r\n.\r\n');
        if (end < 0) return;
        data += buffer.slice(0, end);
        buffer = buffer.slice(end + 5);
        appendFileSync(file, JSON.stringify({ to, data }) + '\n');
        data = null;
        to = [];
        say('250 kept');
        continue;
      }
      const nl = buffer.indexOf('\r\n');
      if (nl < 0) return;
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 2);
      const verb = line.slice(0, 4).toUpperCase();
      if (verb === 'EHLO' || verb === 'HELO') say('250 dakghar-e2e');
      else if (verb === 'MAIL') say('250 ok');
      else if (verb === 'RCPT') {
        to.push(line.replace(/^RCPT TO:\s*<?([^>]*)>?.*$/i, '$1'));
        say('250 ok');
      } else if (verb === 'DATA') {
        data = '';
        say('354 go on');
      } else if (verb === 'QUIT') {
        say('221 bye');
        socket.end();
      } else say('250 ok');
    }
  });
}).listen(Number(port), '127.0.0.1');
