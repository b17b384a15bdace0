/** The demo's topics (docs/demo.md). */
export const DEMO_TOPICS = {
  usersSignedUp: 'users.signed-up',
  paymentsRequested: 'payments.requested',
  paymentsProcessed: 'payments.processed',
  welcomeEmail: 'notifications.welcome-email',
} as const;
