from django.http import HttpRequest, JsonResponse

from hookinbox.examples.django_shop.orders.models import Order


def order_list(request: HttpRequest) -> JsonResponse:
    fields = ("payment_id", "customer_id", "amount", "currency", "event_id")
    return JsonResponse({"orders": list(Order.objects.order_by("id").values(*fields))})
