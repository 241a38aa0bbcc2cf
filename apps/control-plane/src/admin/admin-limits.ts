/** Limits of admin request bodies, shared by their DTOs and the service (the CLI calls it directly). */
export const API_KEY_NAME_MAX_LENGTH = 100;
/** A SHA-256 fingerprint as 64 hex digits, or 32 colon-separated pairs (OpenSSL, Node). */
export const FINGERPRINT_MAX_LENGTH = 95;
export const REVOCATION_REASON_MAX_LENGTH = 200;
