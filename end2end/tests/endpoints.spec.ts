import { expect, test } from '@playwright/test';
import { ready, signIn, snapshot } from './helpers';
import { api, Receiver, uniqueId } from './receiver';

test('add an endpoint, read health that matches the receiver, pause and resume it', async ({ page }, info) => {
  // The 503 holds the whole endpoint for a backoff and a spread of at
  // least a second (SPEC §11), on top of the retries' own waits.
  test.setTimeout(60_000);
  const rx = await Receiver.start([500, 503]);
  const type = uniqueId('health', info.project.name);

  await signIn(page, info);
  await page.goto('/endpoints');
  await ready(page, info);
  await page.getByLabel('URL').fill(rx.url);
  await page.getByLabel('Description').fill(`Receiver for ${info.project.name}`);
  await page.getByLabel('Event types').fill(type);
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  await expect(page).toHaveURL(/\/endpoints\/ep_/);
  await ready(page, info);
  await expect(page.locator('h1')).toHaveText(rx.url);
  const endpointId = page.url().split('/').pop()!;

  // Three events: two fail once, then every retry and the third succeed.
  for (let i = 0; i < 3; i++) {
    await api('POST', '/api/v1/events', { type, payload: { n: i } });
  }
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(5);
  const delivered = rx.requests.filter((r) => r.status < 300).length;
  expect(delivered).toBe(3);

  await page.reload();
  await ready(page, info);
  await expect(page.getByTestId('rate-24h')).toHaveText(`${Math.round((delivered * 100) / 5)}%`);
  await expect(page.getByTestId('rate-7d')).toHaveText('60%');
  await expect(page.getByTestId('p95-latency')).toHaveText(/\d+ ms|\d+\.\d s/);
  await expect(page.getByTestId('queue')).toHaveText('0');
  await expect(page.getByTestId('chart')).toHaveAttribute('aria-label', '3 delivered and 2 failed attempts in 24 hours');
  await expect(page.getByTestId('last-errors').locator('li')).toHaveCount(2);
  await snapshot(page, info, 'endpoint-detail');

  // Pause: events wait. Resume: they go out.
  await page.getByTestId('pause').click();
  await expect(page.getByTestId('endpoint-state')).toHaveText('paused');
  await expect(page.getByTestId('endpoint-state-detail')).toHaveText('paused by the customer');
  await api('POST', '/api/v1/events', { type, payload: { n: 'while paused' } });
  await page.reload();
  await expect(page.getByTestId('queue')).toHaveText('1');
  expect(rx.requests.length).toBe(5);
  await snapshot(page, info, 'endpoint-paused');
  await ready(page, info);
  await page.getByTestId('resume').click();
  await expect(page.getByTestId('endpoint-state')).toHaveText('active');
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(6);

  await page.goto('/endpoints');
  const row = page.getByTestId('endpoint-row').filter({ hasText: rx.url });
  await expect(row.getByTestId('success-24h')).toHaveText('67% of 6');
  await snapshot(page, info, 'endpoints');
  await api('DELETE', `/api/v1/endpoints/${endpointId}`);
  await rx.stop();
});

test('a test event, the secret behind Reveal, and rotation', async ({ page }, info) => {
  test.skip(info.project.name !== 'hydrated', 'Reveal and the sent-event link need the browser');
  const rx = await Receiver.start();
  const created = await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: ['never.sent'] });
  await signIn(page, info);
  await page.goto(`/endpoints/${created.id}`);
  await ready(page, info);

  await page.getByTestId('send-test').click();
  await expect(page.getByTestId('test-sent')).toContainText('Test event sent');
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);
  expect(rx.requests[0].body).toContain('A test event');

  await expect(page.getByTestId('secret')).toHaveCount(0);
  await page.getByTestId('reveal').click();
  await expect(page.getByTestId('secret')).toHaveText(created.secret);
  await page.getByTestId('rotate').click();
  await expect(page.getByText('The previous secret also signs until')).toBeVisible();
  await page.getByTestId('reveal').click();
  await expect(page.getByTestId('secret')).not.toHaveText(created.secret);
  await snapshot(page, info, 'endpoint-secret');

  // Delete asks first, with or without JavaScript.
  await page.getByTestId('delete').click();
  await expect(page.getByText('This cannot be undone.')).toBeVisible();
  await expect(page).toHaveURL(new RegExp(`/endpoints/${created.id}$`));
  await page.getByTestId('delete-confirm').click();
  await expect(page).toHaveURL(/\/endpoints$/);
  await expect(page.getByTestId('endpoint-row').filter({ hasText: rx.url })).toHaveCount(0);
  await rx.stop();
});

test('a receiver that asks to slow down shows as throttled, with a lower cap', async ({ page }, info) => {
  // Long enough to outlast signing in and loading the page.
  const rx = await Receiver.start([{ status: 429, headers: { 'retry-after': '120' } }]);
  const type = uniqueId('slow', info.project.name);
  const created = await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type], max_in_flight: 4 });
  await api('POST', '/api/v1/events', { type, payload: {} });
  // The answer is recorded a moment after the receiver saw the request.
  await expect
    .poll(async () => (await api('GET', `/api/v1/endpoints/${created.id}`)).throttle_status, { timeout: 20_000 })
    .toBe(429);
  await signIn(page, info);
  await page.goto(`/endpoints/${created.id}`);
  await ready(page, info);
  await expect(page.getByTestId('throttled')).toContainText('(receiver asked, 429)');
  await expect(page.getByTestId('in-flight-cap')).toContainText('2 now, of 4');
  await snapshot(page, info, 'endpoint-throttled');
  await rx.stop();
});

test('a paused endpoint discards its queue after saying how many', async ({ page }, info) => {
  const rx = await Receiver.start();
  const type = uniqueId('held', info.project.name);
  const created = await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  await api('POST', `/api/v1/endpoints/${created.id}/pause`);
  for (let i = 0; i < 3; i++) await api('POST', '/api/v1/events', { type, payload: { i } });
  await signIn(page, info);
  await page.goto(`/endpoints/${created.id}`);
  await ready(page, info);
  const discard = page.getByTestId('discard-queue');
  await expect(discard).toHaveText('Discard 3 queued deliveries');
  page.once('dialog', (d) => d.accept());
  await discard.click();
  await expect.poll(async () => (await api('GET', `/api/v1/endpoints/${created.id}/queue`)).pending).toBe(0);
  await expect(page.getByTestId('discard-queue')).toHaveCount(0);
  // Resumed, a new event arrives: proof the discarded three never will.
  await api('POST', `/api/v1/endpoints/${created.id}/resume`);
  await api('POST', '/api/v1/events', { type, payload: { after: true } });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);
  expect(rx.requests[0].body).toContain('after');
  await rx.stop();
});

test('notifications, API keys and the contract page', async ({ page }, info) => {
  const rx = await Receiver.start([410]);
  const type = uniqueId('gone', info.project.name);
  await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  await api('POST', '/api/v1/events', { type, payload: {} });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);

  await signIn(page, info);
  await page.goto('/notifications');
  await ready(page, info);
  await expect(page.getByTestId('notification').filter({ hasText: rx.url }).first()).toContainText('410 Gone');
  await snapshot(page, info, 'notifications');

  await page.goto('/docs');
  await expect(page.getByTestId('max-attempts')).toHaveText('16');
  await expect(page.getByTestId('retry-statuses')).toHaveText('1xx,3xx,402,404-409,411-421,423-499,5xx');
  await expect(page.getByTestId('schedule').locator('tbody tr')).toHaveCount(15);
  await expect(page.getByTestId('api-operations').locator('tr')).toHaveCount(41);
  const doc = await (await fetch(new URL('/api/openapi.json', page.url()))).json();
  expect(Object.keys(doc.paths)).toContain('/api/v1/events');
  await snapshot(page, info, 'docs');

  await page.goto('/api-keys');
  await ready(page, info);
  await expect(page.getByTestId('key-row').first()).toContainText('…');
  if (info.project.name === 'hydrated') {
    // The whole key can only be shown by the page that asked for it.
    const before = await page.getByTestId('key-row').count();
    await page.getByTestId('new-key-name').fill('e2e producer');
    await page.getByTestId('create-key').click();
    await expect(page.getByTestId('new-key')).toContainText('shown only this once');
    const key = (await page.getByTestId('new-key').locator('code').textContent())!.trim();
    const res = await fetch(`${new URL(page.url()).origin}/api/v1/endpoints`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    await expect(page.getByTestId('key-row')).toHaveCount(before + 1);
    await page.reload();
    await ready(page, info);
    const row = page.getByTestId('key-row').filter({ hasText: 'e2e producer' });
    await expect(row.getByTestId('key-last-used')).not.toContainText('never');
  }
  await snapshot(page, info, 'api-keys');
  await rx.stop();
});

test('editing an endpoint marks each wrong field, keeps what was typed, then saves', async ({ page }, info) => {
  const [before, after] = [await Receiver.start(), await Receiver.start()];
  const type = uniqueId('edit', info.project.name);
  const created = await api('POST', '/api/v1/endpoints', { url: before.url, description: 'Before', event_types: [type] });
  await signIn(page, info);
  await page.goto(`/endpoints/${created.id}`);
  await ready(page, info);
  await page.getByTestId('edit').click();
  await expect(page).toHaveURL(new RegExp(`/endpoints/${created.id}/edit`));
  await ready(page, info);
  await expect(page.getByLabel('URL')).toHaveValue(before.url);
  await expect(page.getByLabel('Event types')).toHaveValue(type);

  await page.getByLabel('Description').fill('After');
  await page.getByLabel('Max in flight').fill('lots');
  await page.getByLabel('Rate limit (per second)').fill('0');
  await page.getByTestId('save-endpoint').click();
  await expect(page.getByTestId('field-error-max_in_flight')).toContainText('whole number');
  await expect(page.getByTestId('field-error-rate_limit_per_sec')).toContainText('at least 1');
  await expect(page.getByTestId('field-error-url')).toHaveCount(0);
  await expect(page.getByLabel('Max in flight')).toHaveAttribute('aria-invalid', 'true');
  await expect(page.getByLabel('Description')).toHaveValue('After');
  await expect(page.getByLabel('Max in flight')).toHaveValue('lots');

  await page.getByLabel('URL').fill(after.url);
  await page.getByLabel('Max in flight').fill('3');
  await page.getByLabel('Rate limit (per second)').fill('');
  await page.getByTestId('save-endpoint').click();
  await expect(page).toHaveURL(new RegExp(`/endpoints/${created.id}$`));
  await expect(page.locator('h1')).toHaveText(after.url);
  await expect(page.getByTestId('in-flight-cap')).toHaveText('3');
  await api('POST', '/api/v1/events', { type, payload: { edited: true } });
  await expect.poll(() => after.requests.length, { timeout: 20_000 }).toBe(1);
  expect(before.requests.length).toBe(0);
  await api('DELETE', `/api/v1/endpoints/${created.id}`);
  await Promise.all([before.stop(), after.stop()]);
});

test('recover failed deliveries since a time: preview the count, confirm, they arrive', async ({ page }, info) => {
  const rx = await Receiver.start([400, 400]);
  const type = uniqueId('recover', info.project.name);
  const created = await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  for (let i = 0; i < 2; i++) await api('POST', '/api/v1/events', { type, payload: { i } });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(2);
  await expect
    .poll(async () => (await api('GET', `/api/v1/events?type=${type}&state=failed`)).data.length, { timeout: 20_000 })
    .toBe(2);

  await signIn(page, info);
  await page.goto(`/endpoints/${created.id}`);
  await ready(page, info);
  await page.getByTestId('recover').click();
  await ready(page, info);
  // The start defaults to when the endpoint began failing, in the viewer's zone.
  await expect(page.getByTestId('recover-since')).not.toHaveValue('');
  await page.getByTestId('recover-preview-button').click();
  await ready(page, info);
  await expect(page.getByTestId('recover-count')).toContainText('2 deliveries to this endpoint failed or expired since');
  await snapshot(page, info, 'endpoint-recover');
  await page.getByTestId('recover-confirm').click();
  await expect(page).toHaveURL(new RegExp(`/endpoints/${created.id}\\?recovered=2`));
  await expect(page.getByTestId('recovered')).toHaveText('Sending 2 deliveries again, spread over 5 minutes.');
  // The first goes at once, the other later in the five minutes.
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(3);
  expect(rx.requests[2].status).toBe(200);
  await api('DELETE', `/api/v1/endpoints/${created.id}`);
  await rx.stop();
});
