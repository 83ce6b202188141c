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
