import { expect, test } from '@playwright/test';
import { ready, signIn, snapshot, USER } from './helpers';

test('a wrong password shows an error and opens no session', async ({ page }, info) => {
  await signIn(page, info, 'not the password');
  await expect(page).toHaveURL(/\/login\?error=1/);
  await expect(page.getByRole('alert')).toHaveText('Invalid email or password.');
  await snapshot(page, info, 'login-error');

  await page.goto('/events');
  await expect(page).toHaveURL(/\/login\?next=%2Fevents$/);
});

test('the right password reaches Events, and a reload keeps the session', async ({ page }, info) => {
  await signIn(page, info);
  await expect(page).toHaveURL(/\/events$/);
  await ready(page, info);
  await expect(page.getByRole('heading', { name: 'Events', exact: true })).toBeVisible();
  await expect(page.getByTestId('user-email')).toHaveText(USER.email);
  await expect(page.getByTestId('account-name')).toHaveText(USER.account);
  await snapshot(page, info, 'events');

  await page.reload();
  await ready(page, info);
  await expect(page).toHaveURL(/\/events$/);
  await expect(page.getByTestId('user-email')).toHaveText(USER.email);
});

test('pages run under their Content-Security-Policy with nothing refused', async ({ page }, info) => {
  const refused: string[] = [];
  page.on('console', (message) => {
    if (message.text().includes('Content Security Policy')) refused.push(message.text());
  });
  const login = await page.goto('/login');
  expect(login?.headers()['content-security-policy']).toContain("'nonce-");
  expect(login?.headers()['x-content-type-options']).toBe('nosniff');
  await signIn(page, info);
  await expect(page).toHaveURL(/\/events$/);
  await ready(page, info);
  await page.goto('/endpoints');
  await ready(page, info);
  expect(refused).toEqual([]);
});

test('logout ends the session and Events sends you back to sign in', async ({ page }, info) => {
  await signIn(page, info);
  await expect(page).toHaveURL(/\/events$/);
  await ready(page, info);
  await page.getByRole('button', { name: 'Log out' }).click();
  await expect(page).toHaveURL(/\/login$/);

  await page.goto('/events');
  await expect(page).toHaveURL(/\/login\?next=%2Fevents$/);
  await expect(page.getByRole('button', { name: 'Sign in' })).toBeVisible();
});

test('a deep link survives signing in', async ({ page }, info) => {
  await page.goto('/events?state=failed');
  await expect(page).toHaveURL(/\/login\?next=/);
  await ready(page, info);
  await page.getByLabel('Email').fill(USER.email);
  await page.getByLabel('Password').fill(USER.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/events\?state=failed$/);
});

test('the binary alone serves the stylesheet, scripts and wasm, kept by version', async ({ page, request }, info) => {
  // serve.sh runs a copy of the binary by itself in an empty folder.
  await signIn(page, info);
  await expect(page).toHaveURL(/\/events$/);
  await ready(page, info);
  const css = await page.locator('link[rel="stylesheet"]').first().getAttribute('href');
  expect(css).toMatch(/^\/pkg\/[0-9a-f]{16}\/dakghar\.css$/);
  const pkg = css!.replace(/dakghar\.css$/, '');
  // The page is styled by it: the body has the stylesheet's --bg, not the browser's default.
  const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  expect(background).toBe('rgb(246, 247, 249)');

  for (const [file, type] of [
    ['dakghar.css', 'text/css'],
    ['dakghar.js', 'javascript'],
    ['dakghar.wasm', 'application/wasm'],
  ]) {
    const plain = await request.get(pkg + file, { headers: { 'accept-encoding': 'identity' } });
    expect(plain.status(), file).toBe(200);
    expect(plain.headers()['content-type']).toContain(type);
    expect(plain.headers()['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.headers()['content-encoding']).toBeUndefined();
    const br = await request.get(pkg + file, { headers: { 'accept-encoding': 'gzip, br' } });
    expect(br.headers()['content-encoding'], file).toBe('br');
    expect(br.headers()['vary']).toContain('accept-encoding');
    // The client decodes bodies, so compare the sizes on the wire.
    expect(Number(br.headers()['content-length'])).toBeLessThan(Number(plain.headers()['content-length']));
    expect(await br.body()).toEqual(await plain.body());
  }
  // Another build's bundle is not mixed in; unversioned files revalidate.
  expect((await request.get('/pkg/0123456789abcdef/dakghar.js')).status()).toBe(404);
  const icon = await request.get('/favicon.svg');
  expect(icon.headers()['cache-control']).toBe('no-cache');
  const again = await request.get('/favicon.svg', { headers: { 'if-none-match': icon.headers()['etag'] } });
  expect(again.status()).toBe(304);
});
