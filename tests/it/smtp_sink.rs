//! A real SMTP server on 127.0.0.1 for tests: enough of RFC 5321 for a
//! client to deliver mail, which it keeps; it can refuse the next N.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc, Mutex,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::TcpListener,
};

#[derive(Debug, Clone)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    pub data: String,
}

#[derive(Clone, Default)]
pub struct SmtpSink {
    pub port: u16,
    mails: Arc<Mutex<Vec<Mail>>>,
    refuse: Arc<AtomicUsize>,
}

impl SmtpSink {
    pub async fn start() -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sink = SmtpSink {
            port: listener.local_addr().unwrap().port(),
            ..SmtpSink::default()
        };
        let serving = sink.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let sink = serving.clone();
                tokio::spawn(async move { sink.session(socket).await });
            }
        });
        sink
    }

    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    pub fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap().clone()
    }

    /// Answers the next `n` messages with a temporary failure.
    pub fn refuse_next(&self, n: usize) {
        self.refuse.store(n, Ordering::SeqCst);
    }

    async fn session(&self, socket: tokio::net::TcpStream) {
        let (read, mut write) = socket.into_split();
        let mut lines = BufReader::new(read).lines();
        let _ = write.write_all(b"220 sink ESMTP\r\n").await;
        let (mut from, mut to) = (String::new(), Vec::new());
        while let Ok(Some(line)) = lines.next_line().await {
            let upper = line.to_ascii_uppercase();
            let reply: &[u8] = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
                b"250-sink\r\n250 8BITMIME\r\n"
            } else if upper.starts_with("MAIL FROM:") {
                from = line[10..].trim().to_string();
                to.clear();
                b"250 ok\r\n"
            } else if upper.starts_with("RCPT TO:") {
                to.push(line[8..].trim().to_string());
                b"250 ok\r\n"
            } else if upper == "DATA" {
                if self
                    .refuse
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    b"451 try again later\r\n"
                } else {
                    let _ = write.write_all(b"354 go on\r\n").await;
                    let mut data = String::new();
                    while let Ok(Some(l)) = lines.next_line().await {
                        if l == "." {
                            break;
                        }
                        data.push_str(&l);
                        data.push('\n');
                    }
                    self.mails.lock().unwrap().push(Mail {
                        from: from.clone(),
                        to: to.clone(),
                        data,
                    });
                    b"250 queued\r\n"
                }
            } else if upper == "QUIT" {
                let _ = write.write_all(b"221 bye\r\n").await;
                return;
            } else {
                b"250 ok\r\n"
            };
            if write.write_all(reply).await.is_err() {
                return;
            }
        }
    }
}
