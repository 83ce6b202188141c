import { expect, Page, test } from '@playwright/test';
import { ready, signIn, snapshot } from './helpers';
import { api, apiRaw, Receiver, uniqueId } from './receiver';

/** Reloads until `check` passes: without JavaScript the page cannot refresh itself. */
async function reloadUntil(page: Page, check: () => Promise<void>) {
  await expect(async () => {
    await page.reload();
    await check();
  }).toPass({ timeout: 20_000 });
}

test('find a failing-then-delivered event, read its attempts, and resend it', async ({ page }, info) => {
  const rx = await Receiver.start([500]);
  // Types and ids of their own, so the other project's endpoints stay out of it.
  const type = uniqueId('invoice.paid', info.project.name);
  const endpoint = await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  const id = uniqueId('evt', info.project.name);
  await api('POST', '/api/v1/events', { id, type, payload: { amount: 4200, currency: 'EUR' } });
  // Fails once, then the retry (a second later in this configuration) succeeds.
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(2);

  await signIn(page, info);
  await ready(page, info);

  // Find it by filters, set through the form: they land in the URL.
  await page.getByLabel('State').selectOption('delivered');
  await page.getByLabel('Event type').fill(type);
  await page.getByLabel('Endpoint').selectOption(endpoint.id);
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page).toHaveURL(/state=delivered/);
  await expect(page).toHaveURL(new RegExp(`type=${type}`));
  const row = page.getByTestId('event-row').filter({ hasText: id });
  await expect(row).toBeVisible();
  await expect(row.locator('.badge')).toHaveText(/delivered/);
  await snapshot(page, info, 'events-filtered');

  // And by id; a failed-state filter does not show it.
  await page.goto(`/events?id=${id}`);
  await expect(page.getByTestId('event-row')).toHaveCount(1);
  await page.goto(`/events?id=${id}&state=failed`);
  await expect(page.getByText('No events match these filters')).toBeVisible();

  // The detail: both attempts, newest first, with status and duration.
  await page.goto(`/events?id=${id}`);
  await ready(page, info);
  await page.getByTestId('event-row').getByRole('link').click();
  await expect(page).toHaveURL(new RegExp(`/events/${id}$`));
  await ready(page, info);
  await expect(page.getByTestId('payload')).toContainText('"amount": 4200');
  const attempts = page.getByTestId('attempt');
  await expect(attempts).toHaveCount(2);
  await expect(attempts.nth(0).getByTestId('attempt-status')).toHaveText('200');
  await expect(attempts.nth(1).getByTestId('attempt-status')).toHaveText('500');
  await expect(attempts.nth(1).getByTestId('attempt-explanation')).toContainText('500 Internal Server Error — transient');
  await expect(attempts.nth(0).getByTestId('attempt-duration')).toHaveText(/\d+(\.\d)? (ms|s)/);
  await expect(page.getByTestId('delivery-state')).toHaveText('delivered');
  await snapshot(page, info, 'event-detail');

  // Resend: a third attempt appears (by itself when hydrated).
  await page.getByTestId('resend').click();
  if (info.project.name === 'hydrated') {
    await expect(attempts).toHaveCount(3, { timeout: 15_000 });
  } else {
    await expect(page).toHaveURL(new RegExp(`/events/${id}`));
    await reloadUntil(page, async () => expect(page.getByTestId('attempt')).toHaveCount(3));
  }
  await expect(page.getByTestId('delivery-state')).toHaveText('delivered');
  expect(rx.requests.length).toBe(3);
  expect(new Set(rx.requests.map((r) => r.headers['webhook-id']))).toEqual(new Set([id]));
  await snapshot(page, info, 'event-resent');
  await api('DELETE', `/api/v1/endpoints/${endpoint.id}`);
  await rx.stop();
});

test('a search without matches offers a way back', async ({ page }, info) => {
  await signIn(page, info);
  await ready(page, info);
  await page.goto('/events?id=evt_that_does_not_exist');
  await expect(page.getByText('No events match these filters')).toBeVisible();
  await page.getByRole('link', { name: 'Clear the filters' }).click();
  await expect(page).toHaveURL(/\/events$/);
});

test('over the resend limit the button says how long to wait, with or without JavaScript', async ({ page }, info) => {
  // It may wait up to 25 s for a fresh minute (below) before its five
  // resends, each reloaded until it shows without JavaScript: more than
  // the default 30 s on a slow machine.
  test.setTimeout(90_000);
  const rx = await Receiver.start();
  const type = uniqueId('limit.test', info.project.name);
  await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  const id = uniqueId('evt_limit', info.project.name);
  await api('POST', '/api/v1/events', { id, type, payload: {} });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);

  await signIn(page, info);
  await page.goto(`/events/${id}`);
  await ready(page, info);
  const resend = page.getByTestId('resend');
  const hydrated = info.project.name === 'hydrated';
  // serve.sh allows 4 resends per endpoint per minute, counted per clock
  // minute (a fixed window): five resends that straddle a minute's end would
  // all be allowed, so they start with at least 25 s of one ahead.
  const into = Date.now() % 60_000;
  if (into > 35_000) await page.waitForTimeout(60_000 - into + 500);
  for (let n = 2; n <= 5; n++) {
    if (hydrated) {
      await expect(resend).toHaveText('Resend', { timeout: 15_000 });
      await resend.click();
      await expect(page.getByTestId('attempt')).toHaveCount(n, { timeout: 15_000 });
    } else {
      await resend.click();
      await reloadUntil(page, async () => {
        await expect(page.getByTestId('attempt')).toHaveCount(n, { timeout: 1_000 });
        await expect(resend).toHaveText('Resend', { timeout: 1_000 });
      });
    }
  }
  await expect(resend).toHaveText('Resend', { timeout: 15_000 });
  await resend.click();
  await expect(resend).toHaveText(/Try again in \d+ s/);
  await expect(resend).toBeDisabled();
  if (hydrated) {
    const first = Number((await resend.textContent())!.match(/\d+/)![0]);
    await expect.poll(async () => Number((await resend.textContent())!.match(/\d+/)?.[0] ?? 0)).toBeLessThan(first);
  }
  await snapshot(page, info, 'resend-countdown');
  expect(rx.requests.length).toBe(5);
  await rx.stop();
});

/** Exactly what the producer sent: order, a 23-digit number and a duplicate key. */
const AWKWARD = '{"b":1,"a":2,"n":12345678901234567890123,"a":3}';

test('a 422 is found, read, fixed and resent while an open panel stays open', async ({ page }, info) => {
  const rx = await Receiver.start([
    { status: 422, headers: { 'content-type': 'application/json' }, body: '{"error":"amount must be positive","field":"amount"}' },
  ]);
  const type = uniqueId('order.created', info.project.name);
  const name = `Orders ${info.project.name}`;
  await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type], description: name });
  const id = uniqueId('evt_422', info.project.name);
  await apiRaw('POST', '/api/v1/events', `{"id":"${id}","type":"${type}","payload":${AWKWARD}}`);
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);
  expect(rx.requests[0].body).toBe(AWKWARD);

  await signIn(page, info);
  await ready(page, info);
  await page.goto(`/events?state=failed&type=${type}`);
  const row = page.getByTestId('event-row').filter({ hasText: id });
  await expect(row.locator('.badge')).toContainText('failed');
  await expect(row.locator('.badge')).toContainText(name);
  await row.getByRole('link').click();
  await ready(page, info);

  // The payload: Raw is the exact text, Pretty re-indents it and nothing else.
  await expect(page.getByTestId('payload-raw')).toBeHidden();
  await expect(page.getByTestId('payload')).toContainText('"n": 12345678901234567890123');
  await page.locator('label', { hasText: /^Raw$/ }).first().click();
  await expect(page.getByTestId('payload-raw')).toBeVisible();
  await expect(page.getByTestId('payload-raw')).toHaveText(AWKWARD);

  const attempts = page.getByTestId('attempt');
  await expect(attempts).toHaveCount(1);
  await expect(attempts.first().getByTestId('attempt-explanation')).toContainText('422');
  await attempts.first().locator('summary').click();
  await expect(attempts.first().getByTestId('response-body')).toContainText('"error": "amount must be positive"');
  await snapshot(page, info, 'event-422');

  // The receiver is fixed (its script is spent: it answers 200 now); resend.
  await page.getByTestId('resend').click();
  if (info.project.name === 'hydrated') {
    await expect(attempts).toHaveCount(2, { timeout: 15_000 });
    await expect(page.getByTestId('delivery-state')).toHaveText('delivered', { timeout: 15_000 });
    // Updated in place: the panel opened before the resend is still open.
    await expect(attempts.nth(1).getByTestId('attempt-details')).toHaveAttribute('open', '');
    await expect(attempts.nth(1).getByTestId('response-body')).toBeVisible();
  } else {
    await reloadUntil(page, async () => {
      await expect(page.getByTestId('attempt')).toHaveCount(2, { timeout: 1_000 });
      await expect(page.getByTestId('delivery-state')).toHaveText('delivered', { timeout: 1_000 });
    });
  }
  expect(rx.requests[1].body).toBe(AWKWARD);
  await rx.stop();
});

test('an unknown event is a 404 page', async ({ page }, info) => {
  await signIn(page, info);
  await ready(page, info);
  const res = await page.goto('/events/evt_that_never_was');
  expect(res!.status()).toBe(404);
  await expect(page.getByRole('alert')).toContainText('not found');
});

test('on a 390 px wide phone no page scrolls sideways', async ({ page }, info) => {
  const rx = await Receiver.start();
  const type = uniqueId('phone', info.project.name);
  const endpoint = await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  const id = uniqueId('evt_phone', info.project.name);
  await api('POST', '/api/v1/events', { id, type, payload: { a: 'x'.repeat(300) } });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);
  await page.setViewportSize({ width: 390, height: 844 });
  await signIn(page, info);
  await ready(page, info);
  for (const path of ['/events', `/events/${id}`, '/endpoints', `/endpoints/${endpoint.id}`, '/notifications', '/docs']) {
    await page.goto(path);
    await ready(page, info);
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    const culprits = await page.evaluate(() =>
      [...document.querySelectorAll('body *')]
        .filter((e) => !e.closest('pre') && e.getBoundingClientRect().right > 390)
        .map((e) => `${e.tagName}.${e.className}: ${(e.textContent ?? '').slice(0, 50)}`)
        .slice(0, 5),
    );
    expect(wide, `${path}: ${culprits.join(' | ')}`).toBeLessThanOrEqual(390);
  }
  await page.goto(`/events/${id}`);
  await snapshot(page, info, 'event-phone');
  await rx.stop();
});

test('a session that runs out on an open page offers the way back in', async ({ page, context }, info) => {
  test.skip(info.project.name !== 'hydrated', 'without JavaScript every page load is checked by the server, which sends to sign-in');
  const rx = await Receiver.start();
  const type = uniqueId('expired', info.project.name);
  await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  const id = uniqueId('evt_expired', info.project.name);
  await api('POST', '/api/v1/events', { id, type, payload: {} });
  await signIn(page, info);
  await page.goto(`/events?type=${type}`);
  await ready(page, info);
  await context.clearCookies();
  // A link followed inside the app: its data comes from a server function.
  await page.getByTestId('event-row').getByRole('link').click();
  const notice = page.getByRole('alert');
  await expect(notice).toContainText('please sign in');
  await notice.getByRole('link', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/login\?next=%2Fevents%2F/);
  await rx.stop();
});

test("times arrive in UTC and turn to the viewer's zone once the page runs", async ({ browser }, info) => {
  const hydrated = info.project.name === 'hydrated';
  const context = await browser.newContext({ timezoneId: 'Asia/Dhaka', javaScriptEnabled: hydrated });
  const page = await context.newPage();
  const rx = await Receiver.start();
  const type = uniqueId('zone', info.project.name);
  await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  const id = uniqueId('evt_zone', info.project.name);
  await api('POST', '/api/v1/events', { id, type, payload: {} });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);
  await signIn(page, info);
  await ready(page, info);

  // The list: how long ago, the exact time on hover, UTC for machines.
  await page.goto(`/events?type=${type}`);
  await ready(page, info);
  const listed = page.getByTestId('event-row').locator('time');
  await expect(listed).toHaveText(/( ago|^now)$/);
  await expect(listed).toHaveAttribute('datetime', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  await expect(listed).toHaveAttribute('title', hydrated ? /UTC\+06:00 · .* UTC$/ : /^\S+ \S+ UTC$/);

  // The event: Dhaka's wall clock after hydration, UTC before it and without JavaScript.
  await page.goto(`/events/${id}`);
  await ready(page, info);
  const created = page.locator('.page-head time');
  await expect(created).toHaveText(hydrated ? /UTC\+06:00$/ : /UTC$/);
  await expect(created).toHaveAttribute('title', /UTC$/);
  await context.close();
  await rx.stop();
});

test('the last answer, a time range and type suggestions narrow the list, and a wrong filter says why', async ({ page }, info) => {
  const rx = await Receiver.start([422]);
  const type = uniqueId('answer', info.project.name);
  await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  const refused = uniqueId('evt_refused', info.project.name);
  await api('POST', '/api/v1/events', { id: refused, type, payload: {} });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);
  const taken = uniqueId('evt_taken', info.project.name);
  await api('POST', '/api/v1/events', { id: taken, type, payload: {} });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(2);

  await signIn(page, info);
  await ready(page, info);
  await page.goto('/events');
  await ready(page, info);
  // The account's types are offered as the type is typed.
  await expect(page.locator(`#event-types option[value="${type}"]`)).toHaveCount(1);
  await page.getByLabel('Event type').fill(type);
  await page.getByLabel('Last answer').fill('4xx');
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page).toHaveURL(/status=4xx/);
  const rows = page.getByTestId('event-row');
  await expect(rows).toHaveCount(1);
  await expect(rows).toContainText(refused);
  await page.goto(`/events?type=${type}&status=200`);
  await expect(rows).toHaveCount(1);
  await expect(rows).toContainText(taken);
  await page.goto(`/events?type=${type}&status=timeout`);
  await expect(page.getByText('No events match these filters')).toBeVisible();

  // A range that ends before these events holds none of them; one around them holds both.
  await page.goto(`/events?type=${type}`);
  await ready(page, info);
  await page.getByLabel(/^From/).fill('2020-01-01T00:00');
  await page.getByLabel(/^To/).fill('2020-01-02T00:00');
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page).toHaveURL(/from=2020-01-01T00%3A00/);
  await expect(page.getByText('No events match these filters')).toBeVisible();
  await page.getByLabel(/^To/).fill('2099-01-01T00:00');
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(rows).toHaveCount(2);

  // A filter that cannot be read keeps the form, and what was typed, and says why.
  await page.goto(`/events?type=${type}&status=6xx`);
  await expect(page.getByTestId('filter-problem')).toContainText('is not a status');
  await expect(page.getByLabel('Last answer')).toHaveValue('6xx');
  await expect(page.getByLabel('Event type')).toHaveValue(type);
  await rx.stop();
});

test('26 and more events page forward and back with none twice and none missing', async ({ page }, info) => {
  test.setTimeout(60_000);
  const type = uniqueId('paging', info.project.name);
  const sent: string[] = [];
  for (let i = 0; i < 30; i++) {
    const id = `${uniqueId('evt_page', info.project.name)}_${String(i).padStart(2, '0')}`;
    await api('POST', '/api/v1/events', { id, type, payload: { i } });
    sent.push(id);
  }
  await signIn(page, info);
  await ready(page, info);
  await page.goto(`/events?type=${type}`);
  await ready(page, info);
  const ids = async () => page.getByTestId('event-row').locator('code.event-id').allTextContents();
  const first = await ids();
  expect(first).toHaveLength(25);
  await page.getByRole('link', { name: /Older events/ }).click();
  await expect(page).toHaveURL(/cursor=/);
  await expect(page.getByTestId('event-row')).toHaveCount(5);
  const second = await ids();
  expect(new Set([...first, ...second])).toEqual(new Set(sent));
  await expect(page.getByRole('link', { name: /Older events/ })).toHaveCount(0);
  await page.getByRole('link', { name: /Newer events/ }).click();
  await expect(page).toHaveURL(/before=/);
  await expect(page.getByTestId('event-row')).toHaveCount(25);
  expect(await ids()).toEqual(first);
  await expect(page.getByRole('link', { name: /Newer events/ })).toHaveCount(0);
});

test('an event id with / ? # % opens from the list', async ({ page }, info) => {
  const rx = await Receiver.start();
  const type = uniqueId('odd.id', info.project.name);
  await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  const id = `${uniqueId('evt', info.project.name)}/a?b=c#d%20e`;
  await api('POST', '/api/v1/events', { id, type, payload: { odd: true } });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);
  await signIn(page, info);
  await ready(page, info);
  await page.goto(`/events?type=${type}`);
  await ready(page, info);
  await page.getByTestId('event-row').getByRole('link').click();
  await ready(page, info);
  await expect(page.getByTestId('event-id')).toHaveText(id);
  await expect(page.getByTestId('payload')).toContainText('"odd": true');
  await expect(page.getByTestId('delivery-state')).toHaveText('delivered');
  await rx.stop();
});
