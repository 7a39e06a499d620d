"""LTI 1.3 Advantage: `grader serve` as a tool that Canvas, Moodle and other LMSs launch.

keys: the tool's own RSA key pair (kept in the store) and its JWKS; platforms: the LMSs registered;
launch: OIDC login and the id_token's checks; accounts: LMS users as roster students and instructors;
deep_link: the instructor places an exercise; services: the OAuth2 tokens the platform's services take;
ags: scores sent to the course's gradebook through an outbox; nrps: the roster filled from the course;
routes: the web pages; mount: all of it as `grader serve` takes it. It needs the `lti` extra (PyJWT with
cryptography).
"""
