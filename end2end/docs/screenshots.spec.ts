import { expect, test } from '@playwright/test';
import { ready, signIn } from '../tests/helpers';
import { api, Receiver } from '../tests/receiver';

/** Where the README links them from. */
const DIR = '../docs';

const SIZES = [
  { name: 'desktop', width: 1280, height: 900 },
  { name: 'phone', width: 390, height: 844 },
] as const;

test('the event page, light and dark, on a desktop and a phone', async ({ browser }, info) => {
  test.setTimeout(120_000);
  // A receiver that fails the first try with a JSON reason, then takes the retry.
  const rx = await Receiver.start([
    {
      status: 503,
      headers: { 'content-type': 'application/json' },
      body: '{"error":"database is restarting","retry":true}',
    },
  ]);
  const endpoint = await api('POST', '/api/v1/endpoints', {
    url: rx.url,
    description: 'Billing service',
    event_types: ['invoice.paid'],
  });
  const id = `evt_${Date.now().toString(36)}`;
  await api('POST', '/api/v1/events', {
    id,
    type: 'invoice.paid',
    payload: { invoice: 'in_1QX', customer: 'cus_0042', amount_paid: 4200, currency: 'eur', lines: [{ sku: 'pro-monthly', qty: 1 }] },
  });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(2);

  for (const scheme of ['light', 'dark'] as const) {
    for (const size of SIZES) {
      const context = await browser.newContext({
        colorScheme: scheme,
        viewport: { width: size.width, height: size.height },
        timezoneId: 'Asia/Dhaka',
      });
      const page = await context.newPage();
      await signIn(page, info);
      await expect(page).toHaveURL(/\/events/);
      await page.goto(`/events/${id}`);
      await ready(page, info);
      await page.getByTestId('attempt').last().locator('summary').click();
      // Opening the panel scrolled to it; the picture starts at the top.
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: `${DIR}/event-${scheme}-${size.name}.png`, fullPage: size.name === 'desktop' });
      await context.close();
    }
  }
  await api('DELETE', `/api/v1/endpoints/${endpoint.id}`);
  await rx.stop();
});
