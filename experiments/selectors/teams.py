"""Reads of teams: the membership a request acts in, invitations, members, the dashboard."""

from django.db.models import F, Q, QuerySet
from django.utils import timezone

from experiments.models import Invitation, Membership, Study, Team
from experiments.selectors.fleet import fleet_rows
from experiments.selectors.ranking import team_best_models
from experiments.selectors.studies import with_progress


def membership_current(*, user, team_id: int | None = None) -> Membership | None:
    """The membership a request acts in: `team_id`'s when the user is a member of it (the team in
    the session), else the team the user chose last, else their oldest membership. Never picked by
    name: a team someone else names 'AAA' must not become a new login's team."""
    memberships = Membership.objects.filter(user=user).select_related("team")
    if team_id is not None:
        chosen = memberships.filter(team_id=team_id).first()
        if chosen is not None:
            return chosen
    return memberships.order_by(F("last_chosen").desc(nulls_last=True), "pk").first()


def invitations_for_user(*, user) -> list[Invitation]:
    """Open invitations addressed to this account (by username, or by its e-mail address), for
    teams it is not in yet, oldest first."""
    match = Q(username__iexact=user.get_username())
    if user.email:
        match |= Q(email__iexact=user.email, username="")
    rows = (Invitation.objects.filter(match, accepted_at__isnull=True, declined_at__isnull=True,
                                      expires__gt=timezone.now())
            .exclude(team__memberships__user=user).select_related("team", "created_by").order_by("created"))
    return list(rows)


def dashboard_data(*, team: Team, kinds=()) -> dict:
    """Running studies with their progress, the fleet at a glance (a worker running only jobs, of
    `kinds`, is busy too), the team's best models."""
    running = with_progress(Study.objects.filter(team=team, status=Study.Status.RUNNING).select_related("dataset")
                            .order_by("-started"))
    fleet = fleet_rows(team=team, kinds=kinds)
    best = team_best_models(team=team)
    return {
        "running_studies": running,
        "fleet": {"alive": sum(1 for r in fleet if r["alive"]), "total": len(fleet),
                  "busy": sum(1 for r in fleet if r["alive"] and (r["trials"] or r["other_teams"] or r["jobs"]
                                                                    or r["other_teams_jobs"])),
                  "queues": sorted({q for r in fleet if r["alive"] for q in r["worker"].queues})},
        "best_models": best,
    }


def user_membership(*, user, team_id: int) -> Membership | None:
    """The user's membership of that team, if they are in it."""
    return Membership.objects.filter(user=user, team_id=team_id).first()


def editor_problem(*, user, team_id: int) -> str:
    """Why `user` may not change the team's models now, in words ("bob is no longer a member of
    Acme"), or "" when they are one of its owners or editors: what anything acting for a person
    outside a request (a recipe's runs) checks before it acts."""
    if user is None:
        return "the account it acted for was deleted"
    membership = Membership.objects.filter(user=user, team_id=team_id).select_related("team").first()
    if membership is None:
        team = Team.objects.filter(pk=team_id).values_list("name", flat=True).first()
        return f"{user.get_username()} is no longer a member of {team}"
    if not membership.can_edit:
        return f"{user.get_username()} is a {membership.role} of {membership.team.name} now"
    return ""


def team_membership(*, team: Team, membership_id: int) -> Membership | None:
    return Membership.objects.select_related("user", "team").filter(pk=membership_id, team=team).first()


def team_members(*, team: Team) -> QuerySet[Membership]:
    return Membership.objects.filter(team=team).select_related("user").order_by("user__username")


def team_open_invitation(*, team: Team, invitation_id: int) -> Invitation | None:
    """One of the team's invitations not accepted yet."""
    return Invitation.objects.filter(pk=invitation_id, team=team, accepted_at__isnull=True).first()


def team_open_invitations(*, team: Team) -> QuerySet[Invitation]:
    return Invitation.objects.filter(team=team, accepted_at__isnull=True).select_related("created_by")
