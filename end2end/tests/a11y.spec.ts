import AxeBuilder from '@axe-core/playwright';
import { Browser, expect, Page, test, TestInfo } from '@playwright/test';
import { ADMIN, ready, signIn } from './helpers';
import { api, Receiver, uniqueId } from './receiver';

/**
 * A page to scan as this project's visitor sees it. axe runs as a script,
 * so the no-JavaScript project scans the server's render in a browser
 * whose own scripts may run but whose app bundle never loads: the page
 * stays exactly as it arrived.
 */
async function scanningPage(browser: Browser, info: TestInfo, colorScheme: 'light' | 'dark' = 'light'): Promise<Page> {
  const context = await browser.newContext({ javaScriptEnabled: true, colorScheme });
  if (info.project.name !== 'hydrated') {
    await context.route('**/pkg/**', (route) => route.abort());
  }
  return context.newPage();
}

async function violations(page: Page, info: TestInfo, path: string): Promise<string[]> {
  const res = await page.goto(path);
  expect(res, path).not.toBeNull();
  // The not-found page is served without the app, so it never hydrates.
  if (info.project.name === 'hydrated' && path !== '/no-such-page') await ready(page, info);
  const result = await new AxeBuilder({ page }).analyze();
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${path}: ${v.id} (${v.impact}) ${v.help}: ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`);
}

test('every page passes an axe scan with nothing serious or critical', async ({ browser }, info) => {
  test.setTimeout(180_000);
  const rx = await Receiver.start([422]);
  const type = uniqueId('a11y', info.project.name);
  const endpoint = await api('POST', '/api/v1/endpoints', { url: rx.url, description: 'Accessibility', event_types: [type] });
  const id = uniqueId('evt_a11y', info.project.name);
  await api('POST', '/api/v1/events', { id, type, payload: { checked: true } });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);

  const page = await scanningPage(browser, info);
  const found: string[] = [];
  for (const path of ['/login', '/forgot-password']) found.push(...(await violations(page, info, path)));
  await signIn(page, info);
  await expect(page).toHaveURL(/\/events/);
  for (const path of [
    '/events',
    `/events?state=failed&type=${type}`,
    `/events/${id}`,
    '/endpoints',
    `/endpoints/${endpoint.id}`,
    `/endpoints/${endpoint.id}/edit`,
    `/endpoints/${endpoint.id}/recover`,
    '/notifications',
    '/api-keys',
    '/team',
    '/docs',
    '/no-such-page',
  ]) {
    found.push(...(await violations(page, info, path)));
  }
  await page.context().clearCookies();
  await signIn(page, info, ADMIN.password, ADMIN.email);
  await expect(page).toHaveURL(/\/events/);
  for (const path of ['/admin', '/admin/replay', '/admin/replay?failed=on', '/admin/audit']) {
    found.push(...(await violations(page, info, path)));
  }
  await page.context().close();

  // The dark palette, on the pages with the most colour.
  const dark = await scanningPage(browser, info, 'dark');
  found.push(...(await violations(dark, info, '/login')).map((v) => `dark ${v}`));
  await signIn(dark, info);
  await expect(dark).toHaveURL(/\/events/);
  for (const path of ['/events', `/events/${id}`, '/endpoints', `/endpoints/${endpoint.id}`, '/docs']) {
    found.push(...(await violations(dark, info, path)).map((v) => `dark ${v}`));
  }
  await dark.context().close();
  expect(found).toEqual([]);
  await api('DELETE', `/api/v1/endpoints/${endpoint.id}`);
  await rx.stop();
});

test('Resend works by keyboard alone', async ({ page }, info) => {
  const rx = await Receiver.start([422]);
  const type = uniqueId('keys', info.project.name);
  await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  const id = uniqueId('evt_keys', info.project.name);
  await api('POST', '/api/v1/events', { id, type, payload: {} });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);
  await signIn(page, info);
  await page.goto(`/events/${id}`);
  await ready(page, info);
  // Tab from the top of the page until Resend has the focus.
  const resend = page.getByTestId('resend');
  for (let i = 0; i < 80; i++) {
    await page.keyboard.press('Tab');
    try {
      await expect(resend).toBeFocused({ timeout: 100 });
      break;
    } catch {
      // Not yet: the next Tab.
    }
  }
  await expect(resend).toBeFocused();
  await page.keyboard.press('Enter');
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(2);
  await rx.stop();
});
