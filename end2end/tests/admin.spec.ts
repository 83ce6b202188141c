import { expect, test } from '@playwright/test';
import { ADMIN, ready, signIn, snapshot } from './helpers';
import { api, Receiver, uniqueId } from './receiver';

test('an admin previews, confirms and watches a bulk replay deliver', async ({ page }, info) => {
  // Dead letters: a receiver that refuses three events, then accepts all.
  const rx = await Receiver.start([422, 422, 422]);
  const type = uniqueId('replay', info.project.name);
  const endpoint = await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  for (let i = 0; i < 3; i++) await api('POST', '/api/v1/events', { type, payload: { i } });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(3);

  await signIn(page, info, ADMIN.password, ADMIN.email);
  await ready(page, info);
  await page.getByRole('link', { name: 'Admin' }).click();
  await expect(page).toHaveURL(/\/admin$/);
  await expect(page.getByTestId('account-row').filter({ hasText: 'E2E Account' })).toBeVisible();
  await snapshot(page, info, 'admin');

  await page.goto('/admin/replay');
  await ready(page, info);
  await page.getByLabel('failed').check();
  await page.getByLabel('Endpoint id').fill(endpoint.id);
  await page.getByLabel('Spread over').fill('2s');
  await page.getByRole('button', { name: 'Preview' }).click();
  await expect(page).toHaveURL(/failed=on/);
  await expect(page.getByTestId('preview-total')).toHaveText('3 deliveries match');
  expect(rx.requests.length).toBe(3);
  await snapshot(page, info, 'replay-preview');

  await ready(page, info);
  await page.getByTestId('confirm').click();
  await expect(page).toHaveURL(/\/admin\/replays\/rpl_/);
  if (info.project.name === 'hydrated') {
    await expect(page.getByTestId('replay-delivered')).toHaveText('3', { timeout: 20_000 });
  } else {
    await expect(async () => {
      await page.reload();
      await expect(page.getByTestId('replay-delivered')).toHaveText('3');
    }).toPass({ timeout: 20_000 });
  }
  expect(rx.requests.length).toBe(6);
  await snapshot(page, info, 'replay-progress');

  await page.goto('/admin/audit');
  await expect(page.getByTestId('audit-row').first()).toContainText('bulk replay');
  await api('DELETE', `/api/v1/endpoints/${endpoint.id}`);
  await rx.stop();
});

test('a member sees no admin link and gets 403 by URL', async ({ page }, info) => {
  await signIn(page, info);
  await ready(page, info);
  await expect(page.getByRole('link', { name: 'Admin' })).toHaveCount(0);
  const res = await page.goto('/admin');
  expect(res!.status()).toBe(403);
  await expect(page.getByRole('alert')).toHaveText('you are not allowed to do this');
  const replay = await page.goto('/admin/replay?failed=on');
  expect(replay!.status()).toBe(403);
});
