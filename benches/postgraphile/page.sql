-- What PostGraphile 4's generic schema lacks to answer the Sessions page's own documents
-- (web/src/page.ts, panel.ts, detail.ts), written as a PostGraphile user would: computed
-- columns (`<table>_<name>(row)` functions, exposed as fields of the row's type) and one
-- custom query (`resource_panel`), each STABLE and reading the same tables sessiond reads.
-- No table, view, cache or index of its own.
--
-- Run after the bench generated its data, before PostGraphile starts (it reads the schema
-- once); safe to run again. The documents that use it are the `.graphql` files beside it.

-- Types of the functions' answers (created once; CREATE TYPE has no OR REPLACE).
DO $$
BEGIN
  CREATE TYPE slot_amount AS (slot text, amount float8);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
  CREATE TYPE slot_use AS (slot text, current float8, average float8, maximum float8);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
  CREATE TYPE pending_reason AS (code text, message text, layer text, slot text, requested float8, remaining float8);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
  CREATE TYPE session_expiry AS (at timestamptz, reason text);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
  CREATE TYPE session_app AS (name text, url text);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
  CREATE TYPE session_column AS ("column" text, visible boolean);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
  CREATE TYPE project_access AS (id uuid, name text, session_scopes text[]);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
  CREATE TYPE panel_layer AS (layer text, "limit" float8, used float8, remaining float8);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
  CREATE TYPE panel_slot AS (slot text, used float8, "limit" float8, remaining float8, binding_layer text,
    layers panel_layer[]);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
BEGIN
  CREATE TYPE panel AS (view text, resource_group text, slots panel_slot[]);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

---------------------------------------------------------------------------------------------
-- A session's row, as the list and the detail show it.

-- Whole seconds from creation to termination, or to now while not terminated.
CREATE OR REPLACE FUNCTION sessions_elapsed_seconds(s sessions) RETURNS bigint AS $$
  SELECT greatest(floor(extract(epoch FROM coalesce(s.terminated_at, now()) - s.created_at)), 0)::bigint
$$ LANGUAGE sql STABLE;

-- Requested and occupied slots: cpu (cores), memory (whole bytes), accelerators (every
-- other slot, by name). An absent slot is 0.
CREATE OR REPLACE FUNCTION sessions_requested_cpu(s sessions) RETURNS float8 AS $$
  SELECT coalesce((s.requested_slots->>'cpu')::float8, 0)
$$ LANGUAGE sql STABLE;
CREATE OR REPLACE FUNCTION sessions_requested_memory(s sessions) RETURNS bigint AS $$
  SELECT coalesce(round((s.requested_slots->>'mem')::numeric), 0)::bigint
$$ LANGUAGE sql STABLE;
CREATE OR REPLACE FUNCTION sessions_requested_accelerators(s sessions) RETURNS SETOF slot_amount AS $$
  SELECT j.key, j.value::float8 FROM jsonb_each_text(s.requested_slots) j
  WHERE j.key NOT IN ('cpu', 'mem') ORDER BY j.key COLLATE "C"
$$ LANGUAGE sql STABLE;
CREATE OR REPLACE FUNCTION sessions_occupied_cpu(s sessions) RETURNS float8 AS $$
  SELECT coalesce((s.occupied_slots->>'cpu')::float8, 0)
$$ LANGUAGE sql STABLE;
CREATE OR REPLACE FUNCTION sessions_occupied_memory(s sessions) RETURNS bigint AS $$
  SELECT coalesce(round((s.occupied_slots->>'mem')::numeric), 0)::bigint
$$ LANGUAGE sql STABLE;
CREATE OR REPLACE FUNCTION sessions_occupied_accelerators(s sessions) RETURNS SETOF slot_amount AS $$
  SELECT j.key, j.value::float8 FROM jsonb_each_text(s.occupied_slots) j
  WHERE j.key NOT IN ('cpu', 'mem') ORDER BY j.key COLLATE "C"
$$ LANGUAGE sql STABLE;

-- Place in its resource group's queue: only while it waits (PENDING, or SCHEDULED in its
-- engine's queue); the stored column keeps the last one.
CREATE OR REPLACE FUNCTION sessions_waiting_queue_position(s sessions) RETURNS integer AS $$
  SELECT CASE WHEN s.status IN ('PENDING', 'SCHEDULED') THEN s.queue_position END
$$ LANGUAGE sql STABLE;

-- Why it waits: the stored reasons, only while it waits.
CREATE OR REPLACE FUNCTION sessions_waiting_reasons(s sessions) RETURNS SETOF pending_reason AS $$
  SELECT r->>'code', coalesce(r->>'message', ''), r->>'layer', r->>'slot',
         (r->>'requested')::float8, (r->>'remaining')::float8
  FROM jsonb_array_elements(CASE WHEN s.status IN ('PENDING', 'SCHEDULED') AND jsonb_typeof(s.pending_reasons) = 'array'
                                 THEN s.pending_reasons ELSE '[]'::jsonb END) WITH ORDINALITY AS e(r, n)
  WHERE r->>'code' IS NOT NULL
  ORDER BY n
$$ LANGUAGE sql STABLE;

-- Who made its latest status change: a user, or the system (by `status_actor_rule`). The
-- column has no foreign key, so the user is a computed column.
CREATE OR REPLACE FUNCTION sessions_status_changed_by_kind(s sessions) RETURNS text AS $$
  SELECT CASE WHEN s.status_actor_user_id IS NULL THEN 'SYSTEM' ELSE 'USER' END
$$ LANGUAGE sql STABLE;
CREATE OR REPLACE FUNCTION sessions_status_changed_by_user(s sessions) RETURNS users AS $$
  SELECT u.* FROM users u WHERE u.id = s.status_actor_user_id
$$ LANGUAGE sql STABLE;

-- When a running session will be reclaimed, and why: the earliest of its batch timeout, its
-- lifetime's end and its idle timeout (at the same instant, in that order). Null unless
-- RUNNING.
CREATE OR REPLACE FUNCTION sessions_expiry(s sessions) RETURNS session_expiry AS $$
  SELECT e.at, e.reason
  FROM (SELECT coalesce(s.started_at, s.status_changed_at) AS started) t,
  LATERAL (VALUES
    (1, CASE WHEN s.session_type = 'BATCH' AND s.batch_timeout_seconds > 0
             THEN t.started + s.batch_timeout_seconds * interval '1 second' END, 'BATCH_TIMEOUT'),
    (2, CASE WHEN s.lifetime_seconds > 0
             THEN t.started + s.lifetime_seconds * interval '1 second'
                  + greatest(s.extended_seconds, 0) * interval '1 second' END, 'LIFETIME'),
    (3, CASE WHEN NOT s.exempt_idle AND s.session_type = 'INTERACTIVE' AND (s.idle->>'timeout_seconds')::bigint > 0
             THEN greatest(t.started, s.active_at,
                           CASE WHEN coalesce((s.idle->>'terminal')::boolean, false) THEN s.typed_at END)
                  + (s.idle->>'timeout_seconds')::bigint * interval '1 second' END, 'IDLE')
  ) AS e(rank, at, reason)
  WHERE s.status = 'RUNNING' AND e.at IS NOT NULL
  ORDER BY e.at, e.rank
  LIMIT 1
$$ LANGUAGE sql STABLE;

-- What it uses per slot (latest sample, average, maximum): cpu, mem, then the others by
-- name. Empty before the first sample.
CREATE OR REPLACE FUNCTION sessions_slot_uses(s sessions) RETURNS SETOF slot_use AS $$
  SELECT j.key, (j.value->>0)::float8, (j.value->>1)::float8, (j.value->>2)::float8
  FROM jsonb_each(CASE WHEN jsonb_typeof(s.utilization) = 'object' THEN s.utilization ELSE '{}'::jsonb END) j
  WHERE jsonb_typeof(j.value->0) = 'number' AND jsonb_typeof(j.value->1) = 'number'
    AND jsonb_typeof(j.value->2) = 'number'
  ORDER BY CASE j.key WHEN 'cpu' THEN 0 WHEN 'mem' THEN 1 ELSE 2 END, j.key COLLATE "C"
$$ LANGUAGE sql STABLE;

-- The applications of its image, once RUNNING. PostGraphile cannot know whether this
-- server reaches the session's terminal: `url` is always null.
CREATE OR REPLACE FUNCTION sessions_apps(s sessions) RETURNS SETOF session_app AS $$
  SELECT a.app #>> '{}', NULL::text
  FROM images i, jsonb_array_elements(i.apps) WITH ORDINALITY AS a(app, n)
  WHERE i.name = s.image AND s.status = 'RUNNING' AND jsonb_typeof(i.apps) = 'array'
    AND jsonb_typeof(a.app) = 'string'
  ORDER BY a.n
$$ LANGUAGE sql STABLE;

-- A line of scheduling history as it counts now (sessiond's history::counted): while its
-- session still waits on it, one more attempt for each pass of its resource group since the
-- pass that wrote it, the last of them its last try.
CREATE OR REPLACE FUNCTION scheduling_history_counted_attempts(h scheduling_history) RETURNS integer AS $$
  SELECT h.attempts + coalesce((SELECT (sp.passes - h.pass)::int FROM sessions s
    JOIN scheduler_passes sp ON sp.resource_group = s.resource_group
    WHERE s.id = h.session_id AND s.status = 'PENDING' AND sp.passes > h.pass), 0)
$$ LANGUAGE sql STABLE;
CREATE OR REPLACE FUNCTION scheduling_history_last_tried(h scheduling_history) RETURNS timestamptz AS $$
  SELECT coalesce((SELECT sp.last_pass_at FROM sessions s
    JOIN scheduler_passes sp ON sp.resource_group = s.resource_group
    WHERE s.id = h.session_id AND s.status = 'PENDING' AND sp.passes > h.pass), h.last_tried_at, h.updated_at)
$$ LANGUAGE sql STABLE;

---------------------------------------------------------------------------------------------
-- The viewer: projects and page settings of a user (PostGraphile has no authentication; the
-- document finds the user by e-mail).

-- The projects the user may open, by name: every project for a SUPERADMIN, its domain's for
-- an ADMIN, and those it is a member of.
CREATE OR REPLACE FUNCTION users_visible_projects(u users) RETURNS SETOF projects AS $$
  SELECT p.* FROM projects p
  WHERE u.role = 'SUPERADMIN'
     OR (u.role = 'ADMIN' AND p.domain_id = u.domain_id)
     OR p.id IN (SELECT m.project_id FROM project_members m WHERE m.user_id = u.id)
  ORDER BY p.name, p.id
$$ LANGUAGE sql STABLE;

-- The same projects with the session lists the user may read in each: MINE as a member,
-- PROJECT as an administrator of its domain (or a SUPERADMIN).
CREATE OR REPLACE FUNCTION users_project_access(u users) RETURNS SETOF project_access AS $$
  SELECT p.id, p.name::text,
    array_remove(ARRAY[
      CASE WHEN EXISTS (SELECT FROM project_members m WHERE m.user_id = u.id AND m.project_id = p.id) THEN 'MINE' END,
      CASE WHEN u.role = 'SUPERADMIN' OR (u.role = 'ADMIN' AND p.domain_id = u.domain_id) THEN 'PROJECT' END], NULL)
  FROM users_visible_projects(u) p
$$ LANGUAGE sql STABLE;

-- Which resource panel the page shows (MY_TOTAL unless the user chose another).
CREATE OR REPLACE FUNCTION users_resource_panel_view(u users) RETURNS text AS $$
  SELECT coalesce((SELECT st.resource_panel_view FROM user_settings st WHERE st.user_id = u.id
                     AND st.resource_panel_view IN ('MY_TOTAL', 'MY_IN_RESOURCE_GROUP', 'TOTAL_IN_RESOURCE_GROUP')),
                  'MY_TOTAL')
$$ LANGUAGE sql STABLE;

-- The session table's columns, every one once, in display order: the stored list (unknown
-- and repeated entries dropped, the first one kept), then those it leaves out, hidden but
-- NAME; without stored settings, the defaults.
CREATE OR REPLACE FUNCTION users_session_list_columns(u users) RETURNS SETOF session_column AS $$
  WITH known(key, n, by_default) AS (VALUES
    ('NAME', 1, true), ('STATUS', 2, true), ('ACCELERATORS', 3, true), ('CPU', 4, true), ('MEMORY', 5, true),
    ('ELAPSED', 6, true), ('TYPE', 7, false), ('IMAGE', 8, false), ('RESOURCE_GROUP', 9, false),
    ('OWNER', 10, false), ('PROJECT', 11, false), ('CREATED_AT', 12, false), ('STARTED_AT', 13, false),
    ('TERMINATED_AT', 14, false), ('CLUSTER_SIZE', 15, false), ('STATUS_INFO', 16, false), ('RESULT', 17, false),
    ('AGENT', 18, false), ('PRIORITY', 19, false), ('QUEUE_POSITION', 20, false), ('EXPIRY', 21, false),
    ('UTILIZATION', 22, false), ('STATUS_CHANGED_BY', 23, false)),
  stored AS (SELECT st.session_list_columns AS list FROM user_settings st WHERE st.user_id = u.id),
  kept AS (
    SELECT DISTINCT ON (e->>'column') e->>'column' AS key, (e->'visible')::boolean AS visible, i
    FROM stored, jsonb_array_elements(CASE WHEN jsonb_typeof(stored.list) = 'array' THEN stored.list ELSE '[]' END)
         WITH ORDINALITY AS x(e, i)
    WHERE e->>'column' IN (SELECT key FROM known) AND jsonb_typeof(e->'visible') = 'boolean'
    ORDER BY e->>'column', i)
  SELECT key, visible FROM (
    SELECT key, visible, 0 AS part, i AS n FROM kept
    UNION ALL
    SELECT k.key, CASE WHEN EXISTS (SELECT FROM stored) THEN k.key = 'NAME' ELSE k.by_default END, 1, k.n
    FROM known k WHERE k.key NOT IN (SELECT key FROM kept)
  ) c ORDER BY part, n
$$ LANGUAGE sql STABLE;

-- The columns as everyone's sessions show them: OWNER, when hidden, shown right after NAME.
CREATE OR REPLACE FUNCTION users_session_list_columns_everyone(u users) RETURNS SETOF session_column AS $$
  WITH c AS (SELECT c.*, row_number() OVER () AS n FROM users_session_list_columns(u) c),
  owner_shown AS (SELECT EXISTS (SELECT FROM c WHERE c."column" = 'OWNER' AND c.visible) AS yes),
  name_at AS (SELECT n FROM c WHERE c."column" = 'NAME')
  SELECT "column", visible FROM (
    SELECT c."column", c.visible, c.n * 2 AS k FROM c, owner_shown o WHERE o.yes OR c."column" <> 'OWNER'
    UNION ALL
    SELECT 'OWNER', true, na.n * 2 + 1 FROM owner_shown o, name_at na WHERE NOT o.yes
  ) x ORDER BY k
$$ LANGUAGE sql STABLE;

---------------------------------------------------------------------------------------------
-- The resource panel (web/src/panel.ts; sessiond's src/domain/panels.rs): per slot, what the
-- viewer uses in `view` against every layer that limits it (its keypair's policy, the
-- project, the domain, and for the views in a resource group the group's free capacity);
-- remaining is the smallest (limit - used), the binding layer the one that gives it, and
-- the slot's limit that layer's own.
--
-- The viewer is a keypair (PostGraphile has no authentication: a JWT would carry it). The
-- views in a resource group use `resource_group`, by default the project's first. What
-- sessions hold is summed in one aggregate statement over the occupying sessions, as
-- sessiond does.
CREATE OR REPLACE FUNCTION resource_panel(keypair_id uuid, project_id uuid, view text DEFAULT 'MY_TOTAL',
                                          resource_group text DEFAULT NULL) RETURNS panel AS $$
WITH
  viewer AS (SELECT k.id, k.user_id, p.total_resource_slots AS limits
             FROM keypairs k LEFT JOIN keypair_resource_policies p ON p.name = k.resource_policy
             WHERE k.id = resource_panel.keypair_id),
  project AS (SELECT p.id, p.domain_id, p.total_resource_slots AS limits, d.total_resource_slots AS domain_limits
              FROM projects p LEFT JOIN domains d ON d.id = p.domain_id WHERE p.id = resource_panel.project_id),
  allowed AS (SELECT g.name, l.position FROM resource_group_projects l JOIN resource_groups g ON g.name = l.resource_group
              WHERE l.project_id = resource_panel.project_id),
  chosen AS (SELECT CASE
               WHEN resource_panel.resource_group IS NOT NULL
                 THEN (SELECT a.name FROM allowed a WHERE a.name = resource_panel.resource_group)
               WHEN resource_panel.view = 'MY_TOTAL' THEN NULL
               ELSE (SELECT a.name FROM allowed a ORDER BY a.position, a.name LIMIT 1) END AS grp),
  -- The capacity of the group's alive, schedulable agents (of every allowed group for
  -- MY_TOTAL's slots).
  capacity AS (
    SELECT j.key AS slot, sum(j.value::float8) AS amount
    FROM agents a, jsonb_each_text(a.available_slots) j
    WHERE a.status = 'ALIVE' AND a.schedulable
      AND a.resource_group IN (SELECT al.name FROM allowed al, chosen c WHERE c.grp IS NULL OR al.name = c.grp)
    GROUP BY j.key),
  -- What each holder holds, per slot: one aggregate over the occupying sessions.
  used AS (
    SELECT j.key AS slot,
      sum(CASE WHEN s.owner_id = v.user_id THEN j.value::float8 ELSE 0 END) AS mine,
      sum(CASE WHEN s.keypair_id = v.id THEN j.value::float8 ELSE 0 END) AS keypair,
      sum(CASE WHEN s.project_id = p.id THEN j.value::float8 ELSE 0 END) AS project,
      sum(CASE WHEN s.domain_id = p.domain_id THEN j.value::float8 ELSE 0 END) AS domain,
      sum(CASE WHEN s.owner_id = v.user_id AND s.resource_group = c.grp THEN j.value::float8 ELSE 0 END) AS mine_in_group,
      sum(CASE WHEN s.resource_group = c.grp THEN j.value::float8 ELSE 0 END) AS in_group
    FROM viewer v, project p, chosen c, sessions s, jsonb_each_text(s.occupied_slots) j
    WHERE s.status IN ('SCHEDULED', 'PREPARING', 'PULLING', 'PREPARED', 'CREATING', 'RUNNING', 'TERMINATING')
      AND (s.owner_id = v.user_id OR s.keypair_id = v.id OR s.project_id = p.id OR s.domain_id = p.domain_id
           OR s.resource_group = c.grp)
    GROUP BY j.key),
  -- Every slot the group serves, then any other the viewer holds, in the catalogue's order.
  slots AS (
    SELECT n.slot, coalesce(t.position, 2147483647) AS position, coalesce(cap.amount, 0) AS capacity,
      CASE resource_panel.view WHEN 'MY_TOTAL' THEN coalesce(u.mine, 0)
                               WHEN 'MY_IN_RESOURCE_GROUP' THEN coalesce(u.mine_in_group, 0)
                               ELSE coalesce(u.in_group, 0) END AS used
    FROM (SELECT slot FROM capacity UNION SELECT slot FROM used WHERE mine <> 0) n
    LEFT JOIN slot_types t ON t.name = n.slot
    LEFT JOIN capacity cap ON cap.slot = n.slot
    LEFT JOIN used u ON u.slot = n.slot),
  -- The layers of each slot in the view: limit (null: unlimited) and what their holder uses.
  layers AS (
    SELECT sl.slot, x.i, x.layer, x.lim, x.used
    FROM slots sl
    CROSS JOIN project p
    LEFT JOIN viewer v ON true
    LEFT JOIN used u ON u.slot = sl.slot,
    LATERAL (VALUES
      (1, 'KEYPAIR', (v.limits->>sl.slot)::float8, coalesce(u.keypair, 0)),
      (2, 'PROJECT', (p.limits->>sl.slot)::float8, coalesce(u.project, 0)),
      (3, 'DOMAIN', (p.domain_limits->>sl.slot)::float8, coalesce(u.domain, 0)),
      (4, 'RESOURCE_GROUP', sl.capacity, coalesce(u.in_group, 0))) AS x(i, layer, lim, used)
    WHERE CASE resource_panel.view WHEN 'MY_TOTAL' THEN x.i < 4
                                   WHEN 'MY_IN_RESOURCE_GROUP' THEN true
                                   ELSE x.i = 4 END),
  -- The strictest layer of each slot: the smallest limit - used (the first on a tie).
  binding AS (
    SELECT DISTINCT ON (l.slot) l.slot, l.layer, l.lim, l.lim - l.used AS margin
    FROM layers l WHERE l.lim IS NOT NULL ORDER BY l.slot, l.lim - l.used, l.i)
SELECT resource_panel.view, c.grp,
  coalesce((
    SELECT array_agg(ROW(
        sl.slot, sl.used,
        b.lim,
        CASE WHEN b.margin IS NOT NULL THEN greatest(b.margin, 0) END,
        b.layer,
        (SELECT array_agg(ROW(l.layer, l.lim, l.used,
                              CASE WHEN l.lim IS NOT NULL THEN greatest(l.lim - l.used, 0) END)::panel_layer
                          ORDER BY l.i)
         FROM layers l WHERE l.slot = sl.slot))::panel_slot
      ORDER BY sl.position, sl.slot COLLATE "C")
    FROM slots sl LEFT JOIN binding b ON b.slot = sl.slot), '{}')
FROM chosen c
$$ LANGUAGE sql STABLE;

-- PostGraphile's smart tags: these lists are plain lists, not connections.
COMMENT ON FUNCTION sessions_requested_accelerators(sessions) IS E'@simpleCollections only';
COMMENT ON FUNCTION sessions_occupied_accelerators(sessions) IS E'@simpleCollections only';
COMMENT ON FUNCTION sessions_waiting_reasons(sessions) IS E'@simpleCollections only';
COMMENT ON FUNCTION sessions_slot_uses(sessions) IS E'@simpleCollections only';
COMMENT ON FUNCTION sessions_apps(sessions) IS E'@simpleCollections only';
COMMENT ON FUNCTION users_visible_projects(users) IS E'@simpleCollections only';
COMMENT ON FUNCTION users_session_list_columns(users) IS E'@simpleCollections only';
COMMENT ON FUNCTION users_project_access(users) IS E'@simpleCollections only';
COMMENT ON FUNCTION users_session_list_columns_everyone(users) IS E'@simpleCollections only';
